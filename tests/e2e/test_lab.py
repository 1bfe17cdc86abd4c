"""`make lab` as a test: a cold run from clean state, then a warm run that must be fast and change nothing,
then `make lab-clean`. Runs the real lab (see docs/lab.md for what is simulated)."""

import pathlib
import re
import subprocess
import time

import pytest

from tests.awx.awx_runner import job_template, node_extra_vars, run_job
from tests.awx.test_awx_style_runs import awx_project  # noqa: F401 # pylint: disable=unused-import
from lab.paths import lab_root
from tests.playbooks.ansible_run import ROOT, ansible_env, run_playbook

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(3600)]
FIELDS = ("ok", "changed", "unreachable", "failed")
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.MULTILINE)


def make(target):
    started = time.monotonic()
    proc = subprocess.run(
        ["make", "--no-print-directory", target],
        cwd=ROOT,
        env=ansible_env({"ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_NOCOLOR": "1"}),
        capture_output=True,
        text=True,
        timeout=3000,
        check=False,
    )
    assert proc.returncode == 0, f"make {target} failed:\n{proc.stdout[-8000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout, time.monotonic() - started


def recap(output):
    hosts = {
        m[0]: dict(zip(FIELDS, map(int, m[1:]), strict=True)) for m in RECAP.findall(output.split("PLAY RECAP")[-1])
    }
    assert hosts, "no play recap in the output"
    return hosts


@pytest.fixture(scope="module")
def lab_runs():
    make("lab-clean")
    cold, cold_s = make("lab")
    warm, warm_s = make("lab")
    yield {"cold": cold, "warm": warm, "cold_s": cold_s, "warm_s": warm_s}
    make("lab-clean")


def test_simulation_boundary_is_printed_first(lab_runs):
    out = lab_runs["cold"]
    first_task = out.index("TASK [")
    banner = out.index("SIMULATED: GPUs")
    assert banner < out.index("TASK [", first_task + 1)
    simulated = ("SIMULATED: GPU Operator", "SIMULATED: ConnectX-7 link", "SIMULATED: DCGM exporter")
    for what in (*simulated, "REAL: Kubernetes"):
        assert what in out


def test_cold_run_succeeds_and_changes_things(lab_runs):
    hosts = recap(lab_runs["cold"])
    assert all(h["failed"] == 0 and h["unreachable"] == 0 for h in hosts.values()), hosts
    assert sum(h["changed"] for h in hosts.values()) > 0


def test_warm_run_changes_nothing_and_is_faster(lab_runs):
    hosts = recap(lab_runs["warm"])
    assert all(h["changed"] == 0 and h["failed"] == 0 for h in hosts.values()), hosts
    print(f"lab cold {lab_runs['cold_s']:.0f} s, warm {lab_runs['warm_s']:.0f} s")
    assert lab_runs["warm_s"] < lab_runs["cold_s"]


def test_host_roles_ran_on_the_podman_spark_host(lab_runs):
    """preflight (simulated GB10 nvidia-smi), host_prep and containerd converge the podman host, then change nothing."""
    assert "SIMULATED: Spark host tf-lab-spark-host" in " ".join(lab_runs["cold"].split())
    assert recap(lab_runs["cold"])["tf-lab-spark-host"]["changed"] > 0
    assert recap(lab_runs["warm"])["tf-lab-spark-host"]["changed"] == 0
    facts = lab_runs["cold"].split("preflight_facts:")[1][:800]
    assert "gpu_product: NVIDIA-GB10" in facts and "sm: sm_121" in facts and "unified_memory: true" in facts
    for role in ("preflight", "host_prep", "containerd"):
        ran_on_host = rf"TASK \[tokenfactory\.spark\.{role} : .*\n(?:.*\n)?(ok|changed): \[tf-lab-spark-host\]"
        assert re.search(ran_on_host, lab_runs["warm"]), role


def test_simulated_gpu_nodes_were_verified(lab_runs):
    assert re.search(r"spark-\d+: 1 x NVIDIA-GB10", lab_runs["cold"])


def test_dashboard_queries_answered_by_live_series(lab_runs):
    """Every query of the three dashboards (engine, gateway and GPU panels) and every template variable."""
    for run in ("cold", "warm"):
        text = " ".join(lab_runs[run].split())
        match = re.search(r"Dashboards: (\d+) queries and variables answered with live data", text)
        assert match and int(match.group(1)) >= 45, run
        # The YAML result format doubles the quotes of a single-quoted scalar: check''s, {''200'': ...}.
        statuses = re.search(r"HTTP statuses of the check'{1,2}s requests: (\{[^}]*\})", text).group(1)
        assert "429" in statuses and "400" in statuses, statuses


def test_health_gate_opens_on_the_healthy_simulated_gb10(lab_runs):
    for run in ("cold", "warm"):
        text = " ".join(lab_runs[run].split())
        assert "1 GPU node(s) (spark-01)" in text and "Health gate open." in text, run


def test_validation_summary_and_reports(lab_runs):
    out = lab_runs["cold"]
    assert "VALIDATION REPORT" in out
    assert re.search(r"qwen2-0-5b-instruct\s+localhost\s+32/32", out), "every validation request must succeed"
    reports = re.search(r"reports: (\S+\.json), (\S+\.xml), (\S+\.html)", out)
    assert reports, "report paths not printed"
    for path in reports.groups():
        assert (ROOT / path).is_file() or pathlib.Path(path).is_file(), path


LEDGER = re.compile(
    r"Ledger for tenant lab: (\d+) requests, (\d+) prompt \+ (\d+) completion tokens, cost ([0-9.]+) USD"
)


def ledger(output):
    """The lab's ledger line (the debug callback wraps long messages: compare with whitespace collapsed)."""
    match = LEDGER.search(" ".join(output.split()))
    assert match, "no ledger summary printed"
    return int(match[1]), int(match[2]), int(match[3]), float(match[4])


def test_validation_went_through_the_gateway_and_was_metered(lab_runs):
    assert "went through the real gateway http://127.0.0.1:18480/v1" in " ".join(lab_runs["cold"].split())
    assert "tf_endpoint_base_url: http://127.0.0.1:18480/v1" in lab_runs["cold"].split("CUSTOM STATS")[-1]
    cold, warm = ledger(lab_runs["cold"]), ledger(lab_runs["warm"])
    assert cold[0] >= 32 and cold[1] > 0 and cold[2] > 0 and cold[3] > 0, cold
    # The warm run's 32 validation requests are added to the same tenant's ledger (nothing was reset).
    assert warm[0] >= cold[0] + 32 and warm[3] > cold[3], (cold, warm)


def test_gateway_credentials_and_key_are_0600_files_never_printed(lab_runs):
    gateway_dir = lab_root() / "tf-lab-gateway"
    reports = "".join(path.read_text() for path in (ROOT / "reports/lab").glob("lab.*"))
    for name in ("admin-token", "key-pepper", "lab-validation.key", "lab-dashboard-check.key"):
        path = gateway_dir / name
        assert path.stat().st_mode & 0o777 == 0o600, name
        secret = path.read_text().strip()
        assert len(secret) >= 32, name
        for where, text in (("cold", lab_runs["cold"]), ("warm", lab_runs["warm"]), ("reports", reports)):
            assert secret not in text, f"{name} printed in the {where} output"


def test_validation_result_published_with_set_stats(lab_runs):
    stats = lab_runs["cold"].split("CUSTOM STATS")[-1]
    assert "tf_validation" in stats and "tf_endpoint_base_url" in stats


def test_validate_runs_awx_style_with_survey_answers(lab_runs, awx_project, tmp_path):  # noqa: F811 - fixture
    """validate.yml as AWX runs it against the lab: synced project, ansible-runner, survey answers, no terminal."""
    project, env = awx_project
    template = job_template("Token Factory - validate deployment")
    answers = {"tf_validate_requests": 8, "tf_validate_fail_on_breach": "false"}
    job = run_job(
        template, tmp_path / "job", project, project / "inventories/lab/hosts.yml",
        node_extra_vars(template, workflow_vars=answers), envvars=env,
    )  # fmt: skip
    assert job.runner.status == "successful", job.stdout[-4000:]
    assert "qwen2-0-5b-instruct: 8/8 ok" in job.stdout
    assert job.artifacts["tf_validation"]["deployment"] == "qwen2-0-5b-instruct"


@pytest.mark.parametrize(
    ("target", "expected", "ok"),
    [
        ("1.38.0", "Cannot upgrade 1.36.3 -> 1.38.0: kubeadm upgrades one minor version at a time", False),
        ("1.35.9", "Cannot upgrade 1.36.3 -> 1.35.9", False),
        ("1.37.0", "Upgrading 1.36.3 -> 1.37.0", True),
    ],
)
def test_upgrade_plan_against_the_lab_api_server(lab_runs, target, expected, ok):
    """The version check reads the real API server (v1.36.3); the lab has no kubeadm hosts to upgrade."""
    proc = run_playbook(
        ROOT / "playbooks/upgrade.yml",
        "-i",
        ROOT / "inventories/lab/hosts.yml",
        "-e",
        f"tf_kubernetes_upgrade_version={target}",
        check=False,
    )
    assert (proc.returncode == 0) is ok, proc.stdout[-3000:]
    assert expected in proc.stdout
