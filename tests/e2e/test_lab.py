"""`make lab` as a test: lab-clean, a cold run, a warm run, lab-clean. `make lab` creates the podman Spark host
(lab/hosts.yml, SIMULATED GPU and driver), then runs the product unchanged -
`ansible-playbook -i inventories/lab tokenfactory.spark.site` - on it: kubeadm, bridge CNI, the gateway, PostgreSQL,
Redis, Prometheus and the CPU vLLM engine as pods, the tenant and key, validation over HTTPS through the Endpoint;
then the ledger beside the engine's counters (lab/ledger.yml). See docs/lab.md."""

import json
import re
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
import yaml

from lab.paths import lab_root
from tests.awx.awx_runner import job_template, node_extra_vars, run_job
from tests.awx.test_awx_style_runs import awx_project  # noqa: F401 # pylint: disable=unused-import
from tests.playbooks.ansible_run import ROOT, ansible_env, run_playbook

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(5400)]
FIELDS = ("ok", "changed", "unreachable", "failed")
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.MULTILINE)
PRODUCT = "=== the product: ansible-playbook -i inventories/lab tokenfactory.spark.site"
LEDGER_PLAY = "PLAY [Lab - the gateway's ledger"
NODE = "tf-lab-spark-1"
LAB = yaml.safe_load((ROOT / "inventories/lab/hosts.yml").read_text())
NODE_IP = LAB["all"]["children"]["spark_nodes"]["children"]["control_plane"]["hosts"][NODE]["ansible_host"]
SERVING = yaml.safe_load((ROOT / "inventories/lab/group_vars/all/serving.yml").read_text())
HOSTNAME = SERVING["tf_endpoint_hostname"]
MODEL = SERVING["tf_served_model_name"]
PROMETHEUS = f"http://{NODE_IP}:30909"


def make(target):
    started = time.monotonic()
    proc = subprocess.run(
        ["make", "--no-print-directory", target],
        cwd=ROOT,
        env=ansible_env({"ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_NOCOLOR": "1"}),
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    assert proc.returncode == 0, f"make {target} failed:\n{proc.stdout[-8000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout, time.monotonic() - started


def parts(output):
    """The three playbooks of `make lab`: hosts (lab/hosts.yml), product (site), ledger (lab/ledger.yml)."""
    hosts, rest = output.split(PRODUCT)
    product, ledger = rest.split(LEDGER_PLAY)
    return {"hosts": hosts, "product": product, "ledger": ledger}


def recap(output):
    hosts = {
        m[0]: dict(zip(FIELDS, map(int, m[1:]), strict=True)) for m in RECAP.findall(output.split("PLAY RECAP")[-1])
    }
    assert hosts, "no play recap in the output"
    return hosts


def kubectl(*args):
    return subprocess.run(
        ["podman", "exec", NODE, "kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf", *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout


def on_node_get(url):
    """GET from the node (pod addresses are reachable there, not from this machine)."""
    script = "import sys, urllib.request as u; sys.stdout.write(u.urlopen(sys.argv[1], timeout=10).read().decode())"
    return subprocess.run(
        ["podman", "exec", NODE, "python3", "-c", script, url], capture_output=True, text=True, check=True, timeout=60
    ).stdout


def engine_pod():
    pods = json.loads(kubectl("-n", "tokenfactory", "get", "pods", "-o", "json"))["items"]
    (pod,) = [p for p in pods if p["metadata"]["labels"].get("tokenfactory.io/model-deployment")]
    return pod


def engine_counters():
    pod = engine_pod()
    port = pod["spec"]["containers"][0]["ports"][0]["containerPort"]
    text = on_node_get(f"http://{pod['status']['podIP']}:{port}/metrics")

    def total(name):
        return int(sum(float(v) for v in re.findall(rf"(?m)^vllm:{name}_total\{{[^}}]*\}} (\S+)$", text)))

    return total("prompt_tokens"), total("generation_tokens")


@pytest.fixture(scope="module")
def lab_runs():
    make("lab-clean")
    cold, cold_s = make("lab")
    warm, warm_s = make("lab")
    yield {"cold": cold, "warm": warm, "cold_s": cold_s, "warm_s": warm_s}
    make("lab-clean")


def https(path, api_key=None):
    """A request to the public Endpoint from this machine: its hostname (SNI), verified against the lab CA only."""
    context = ssl.create_default_context(cafile=str(lab_root() / "tf-lab/tls/ca.crt"))
    request = urllib.request.Request(f"https://{HOSTNAME}{path}")
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as answer:  # noqa: S310 - https
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def api_key():
    return (lab_root() / "tf-lab/api-keys/lab/validation.key").read_text().strip()


def test_simulation_boundary_is_printed_first(lab_runs):
    out = lab_runs["cold"]
    first_task = out.index("TASK [")
    assert out.index("SIMULATED: GPU and its driver") < out.index("TASK [", first_task + 1)
    banner = " ".join(out[: out.index("TASK [", first_task + 1)].split())
    assert "SIMULATED" in banner and banner.count("SIMULATED:") == 1, banner


def test_cold_run_succeeds_and_changes_things(lab_runs):
    for part, text in parts(lab_runs["cold"]).items():
        hosts = recap(text)
        assert all(h["failed"] == 0 and h["unreachable"] == 0 for h in hosts.values()), (part, hosts)
    assert recap(parts(lab_runs["cold"])["product"])[NODE]["changed"] > 0


def test_warm_run_changes_nothing(lab_runs):
    """The product playbook (and the lab's own steps around it) report changed=0 on the second run."""
    for part, text in parts(lab_runs["warm"]).items():
        hosts = recap(text)
        assert all(h["changed"] == 0 and h["failed"] == 0 for h in hosts.values()), (part, hosts)
    print(f"lab cold {lab_runs['cold_s']:.0f} s, warm {lab_runs['warm_s']:.0f} s")


def test_host_roles_and_kubeadm_ran_on_the_podman_spark_over_ssh(lab_runs):
    product = parts(lab_runs["cold"])["product"]
    facts = product.split("preflight_facts:")[1][:800]
    assert "gpu_product: NVIDIA-GB10" in facts and "unified_memory: true" in facts
    for role in ("preflight", "host_prep", "containerd", "kubernetes", "cni"):
        assert re.search(rf"TASK \[tokenfactory\.spark\.{role} : .*\n(?:.*\n)?(ok|changed): \[{NODE}\]", product), role
    node = json.loads(kubectl("get", "node", NODE, "-o", "json"))
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.36.3"
    assert {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"] == "True"
    # SIMULATED GPU capacity and the labels GPU feature discovery would set, verified by the gpu_operator role.
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "1"
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-GB10"
    assert re.search(rf"{NODE}: 1 x NVIDIA-GB10", product)


def test_platform_and_engine_run_as_pods_on_the_node(lab_runs):
    pods = json.loads(kubectl("get", "pods", "-A", "-o", "json"))["items"]
    running = {
        (p["metadata"]["namespace"], p["metadata"]["labels"].get("app.kubernetes.io/name", p["metadata"]["name"]))
        for p in pods
        if p["status"]["phase"] == "Running" and p["spec"].get("nodeName") == NODE
    }
    names = " ".join(f"{ns}/{name}" for ns, name in sorted(running))
    for wanted in ("tokenfactory-system/tokenfactory-gateway", "postgres", "redis", "prometheus"):
        assert wanted in names, names
    pod = engine_pod()
    container = pod["spec"]["containers"][0]
    assert pod["status"]["phase"] == "Running" and pod["spec"]["nodeName"] == NODE
    assert container["image"] == "localhost/tokenfactory-vllm-cpu:0.32.0"
    assert container["command"] == ["vllm", "serve"] and "--enforce-eager" in container["args"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_endpoint_serves_https_with_its_certificate_and_only_the_openai_routes(lab_runs):
    """From this machine, by the Endpoint's hostname (SNI) and the lab CA: /v1 answers, admin API and metrics do not."""
    status, body = https("/v1/models", api_key())
    assert status == 200 and MODEL in body, (status, body)
    with socket.create_connection((HOSTNAME, 443), timeout=10) as raw:
        context = ssl.create_default_context(cafile=str(lab_root() / "tf-lab/tls/ca.crt"))
        with context.wrap_socket(raw, server_hostname=HOSTNAME) as tls:
            names = [value for kind, value in tls.getpeercert()["subjectAltName"] if kind == "DNS"]
    assert names == [HOSTNAME]
    for path in ("/admin/v1/tenants", "/metrics", "/healthz", "/readyz"):
        status, _body = https(path, api_key())
        assert status in (403, 404), (path, status)


def ledger(output):
    text = " ".join(output.split())
    match = re.search(
        r"Ledger for tenant lab: (\d+) requests, (\d+) prompt \+ (\d+) completion tokens, cost ([0-9.]+) USD\. "
        r"Engine pods (\S+): (\d+) prompt \+ (\d+) generation tokens",
        text,
    )
    assert match, "no ledger summary printed"
    return int(match[1]), int(match[2]), int(match[3]), float(match[4]), int(match[6]), int(match[7])


def test_validation_went_through_the_tls_endpoint_to_the_engine_pod_and_the_ledger_matches_it(lab_runs):
    stats = parts(lab_runs["cold"])["product"].split("CUSTOM STATS")[-1]
    assert f"tf_endpoint_base_url: https://{HOSTNAME}/v1" in stats
    cold, warm = ledger(lab_runs["cold"]), ledger(lab_runs["warm"])
    assert cold[0] >= 32 and cold[1] > 0 and cold[2] > 0 and cold[3] > 0, cold
    # The warm run's validation requests are added to the same tenant's ledger (nothing was reset).
    assert warm[0] >= cold[0] + 32 and warm[3] > cold[3], (cold, warm)
    # Every token the engine pod counted went through the gateway and was metered: ledger = engine counters.
    for run in (cold, warm):
        assert (run[1], run[2]) == (run[4], run[5]), run
    # Read again, straight from the pod now (nothing has generated tokens since the warm run).
    assert engine_counters() == (warm[1], warm[2])


def test_prometheus_in_the_cluster_scrapes_the_engine_and_gateway_pods(lab_runs):
    engine = engine_pod()["metadata"]["name"]
    deadline = time.monotonic() + 120
    while True:
        with urllib.request.urlopen(f"{PROMETHEUS}/api/v1/targets?state=active", timeout=10) as answer:  # noqa: S310
            targets = json.loads(answer.read())["data"]["activeTargets"]
        up = {
            t["discoveredLabels"].get("__meta_kubernetes_pod_name", ""): t["scrapePool"]
            for t in targets
            if t["health"] == "up" and "__meta_kubernetes_pod_name" in t["discoveredLabels"]
        }
        gateway = [pod for pod in up if pod.startswith("tokenfactory-gateway-")]
        if engine in up and gateway:
            break
        assert time.monotonic() < deadline, up
        time.sleep(5)
    query = urllib.parse.quote(f'vllm:generation_tokens_total{{pod="{engine}"}}')
    with urllib.request.urlopen(f"{PROMETHEUS}/api/v1/query?query={query}", timeout=10) as answer:  # noqa: S310
        result = json.loads(answer.read())["data"]["result"]
    assert result and float(result[0]["value"][1]) > 0, result


def test_validation_summary_reports_and_set_stats(lab_runs):
    out = parts(lab_runs["cold"])["product"]
    assert "VALIDATION REPORT" in out
    assert re.search(r"qwen2-0-5b-instruct\s+localhost\s+32/32", out), "every validation request must succeed"
    reports = re.search(r"reports: (\S+\.json), (\S+\.xml), (\S+\.html)", out)
    assert reports, "report paths not printed"
    for path in reports.groups():
        assert (ROOT / path).is_file(), path
    stats = out.split("CUSTOM STATS")[-1]
    assert "tf_validation" in stats and "tf_endpoint_base_url" in stats


def test_api_key_file_is_0600_and_never_printed(lab_runs):
    path = lab_root() / "tf-lab/api-keys/lab/validation.key"
    assert path.stat().st_mode & 0o777 == 0o600
    secret = api_key()
    assert len(secret) >= 32
    reports = "".join(p.read_text() for p in (ROOT / "reports/lab").glob("lab.*"))
    for where, text in (("cold", lab_runs["cold"]), ("warm", lab_runs["warm"]), ("reports", reports)):
        assert secret not in text, f"the API key was printed in the {where} output"


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


def test_health_gate_opens_on_the_cluster_prometheus(lab_runs):
    """playbooks/health_gate.yml against the in-cluster Prometheus (its NodePort). No DCGM exporter runs here (the GPU
    is SIMULATED), so the GPU-metrics requirement is waived; tests/observability runs it with the DCGM stand-in."""
    proc = run_playbook(
        ROOT / "playbooks/health_gate.yml",
        "-i",
        ROOT / "inventories/lab",
        "-e",
        "tf_health_require_gpu_metrics=false",
        check=False,
        extra_env={"ANSIBLE_NOCOLOR": "1"},
    )
    out = " ".join(proc.stdout.split())
    assert proc.returncode == 0 and "Health gate open." in out, out[-3000:]
    assert f"1 GPU node(s) ({NODE})" in out, out[-3000:]
