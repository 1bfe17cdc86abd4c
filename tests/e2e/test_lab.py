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

from lab import dashboard_check
from lab.paths import lab_root, tf_cache
from lab.wait import ProcessDied, wait_until
from tests.awx.awx_runner import job_template, node_extra_vars, run_job
from tests.awx.test_awx_style_runs import awx_project  # noqa: F401 # pylint: disable=unused-import
from tests.e2e import lab_run
from tests.e2e.lab_run import ledger, make, parts
from tests.playbooks.ansible_run import ROOT, play_recap, render_role, run_playbook
from lab.versions import kube_tag, pinned

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(5400)]
NODE = "tf-lab-spark-1"
LAB = yaml.safe_load((ROOT / "inventories/lab/hosts.yml").read_text())
NODE_IP = LAB["all"]["children"]["spark_nodes"]["children"]["control_plane"]["hosts"][NODE]["ansible_host"]
SERVING = yaml.safe_load((ROOT / "inventories/lab/group_vars/all/serving.yml").read_text())
HOSTNAME = SERVING["tf_endpoint_hostname"]
MODEL = SERVING["tf_served_model_name"]
DEPLOYMENT = SERVING["tf_model_deployment"]
PROMETHEUS = f"http://{NODE_IP}:30909"
SIMULATED_DCGM = yaml.safe_load(
    (ROOT / "inventories/lab/group_vars/spark_nodes/simulated_dcgm_exporter.yml").read_text()
)["tf_lab_simulated_dcgm_exporter"]
# Dashboard panels (title prefixes) the lab cannot fill, each with the reason; every other query must answer.
NOT_IN_THE_LAB = {
    "GPU framebuffer used": "a GB10 has no framebuffer: DCGM registers no FB_* fields for it (lab/fixtures/dcgm/"
    "README.md); tests/observability/test_dashboards_live.py answers it from the H100 recording",
}
# Each engine query is an `or` chain over vLLM, NVIDIA NIM and NVIDIA Dynamo names: the lab proves the vLLM branch on
# its own; the other branches stay empty here (the lab runs vLLM), and test_dashboards_live.py proves them.
OTHER_ENGINE_NAMES = "NIM and Dynamo branches: the lab runs vLLM; tests/observability/test_dashboards_live.py"


def kubectl(*args):
    return lab_run.kubectl(NODE, *args)


def engine_pod():
    (pod,) = lab_run.engine_pods(NODE, "tokenfactory", DEPLOYMENT)
    return pod


def engine_counters():
    return lab_run.pod_token_counters(NODE, engine_pod())


@pytest.fixture(scope="module")
def lab_runs():
    make("lab-clean")
    cold, cold_s = make("lab")
    warm, warm_s = make("lab")
    yield {"cold": cold, "warm": warm, "cold_s": cold_s, "warm_s": warm_s}
    make("lab-clean")


def https(path, api_key=None, body=None, timeout=30):
    """A request to the public Endpoint from this machine: its hostname (SNI), verified against the lab CA only; a
    POST of `body` as JSON when given. (status, text)"""
    context = ssl.create_default_context(cafile=str(lab_root() / "tf-lab/tls/ca.crt"))
    request = urllib.request.Request(f"https://{HOSTNAME}{path}")
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    if body is not None:
        request.data = json.dumps(body).encode()
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, context=context, timeout=timeout) as answer:  # noqa: S310 - https
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
        hosts = play_recap(text)
        assert all(h["failed"] == 0 and h["unreachable"] == 0 for h in hosts.values()), (part, hosts)
    assert play_recap(parts(lab_runs["cold"])["product"])[NODE]["changed"] > 0


def test_warm_run_changes_nothing(lab_runs):
    """The product playbook (and the lab's own steps around it) report changed=0 on the second run."""
    for part, text in parts(lab_runs["warm"]).items():
        hosts = play_recap(text)
        assert all(h["changed"] == 0 and h["failed"] == 0 for h in hosts.values()), (part, hosts)
    print(f"lab cold {lab_runs['cold_s']:.0f} s, warm {lab_runs['warm_s']:.0f} s")


def test_host_roles_and_kubeadm_ran_on_the_podman_spark_over_ssh(lab_runs):
    product = parts(lab_runs["cold"])["product"]
    facts = product.split("preflight_facts:")[1][:800]
    assert "gpu_product: NVIDIA-GB10" in facts and "unified_memory: true" in facts
    for role in ("preflight", "host_prep", "containerd", "kubernetes", "cni"):
        assert re.search(rf"TASK \[tokenfactory\.spark\.{role} : .*\n(?:.*\n)?(ok|changed): \[{NODE}\]", product), role
    node = json.loads(kubectl("get", "node", NODE, "-o", "json"))
    assert node["status"]["nodeInfo"]["kubeletVersion"] == kube_tag()
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
    assert container["image"] == f"localhost/tokenfactory-vllm-cpu:{pinned('vllm')}"
    assert container["command"] == ["vllm", "serve"] and "--enforce-eager" in container["args"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_the_gateway_archive_is_in_the_nodes_containerd_under_its_ref_and_digest(lab_runs):
    """gateway_image_source=archive without a registry: cluster.yml's image play put the archive scripts/build-service-
    images made into the node's containerd, where the kubelet found it (the warm run, changed=0, loaded nothing)."""
    gateway = json.loads(
        kubectl("-n", "tokenfactory-system", "get", "deployment", "tokenfactory-gateway", "-o", "json")
    )
    ref = gateway["spec"]["template"]["spec"]["containers"][0]["image"]
    entry = next(e for e in json.loads((tf_cache() / "images/images.json").read_text()) if e["ref"] == ref)
    listed = subprocess.run(["podman", "exec", NODE, "ctr", "-n", "k8s.io", "images", "ls"], capture_output=True,
                            text=True, check=True, timeout=60).stdout  # fmt: skip
    (line,) = [row for row in listed.splitlines() if row.startswith(f"{ref} ")]
    assert entry["digest"] in line, line


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

    def engine_and_gateway_up(targets):
        up = {
            t["discoveredLabels"].get("__meta_kubernetes_pod_name", ""): t["scrapePool"]
            for t in targets
            if t["health"] == "up" and "__meta_kubernetes_pod_name" in t["discoveredLabels"]
        }
        return engine in up and [pod for pod in up if pod.startswith("tokenfactory-gateway-")]

    scraped_until(engine_and_gateway_up)
    result = dashboard_check.query(PROMETHEUS, f'vllm:generation_tokens_total{{pod="{engine}"}}')
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


def scraped_until(done, timeout=120):
    """The in-cluster Prometheus's active targets once done(targets) holds (a timeout names the last targets)."""

    def check():
        url = f"{PROMETHEUS}/api/v1/targets?state=active"
        with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 - the lab's NodePort
            targets = json.loads(answer.read())["data"]["activeTargets"]
        assert done(targets), targets  # not yet: wait_until reports the last one on timeout
        return targets

    return wait_until(check, timeout, "the in-cluster Prometheus's targets", interval=5)


def dcgm_targets(targets):
    return [t for t in targets if t["scrapePool"] == "tokenfactory-dcgm"]


def test_the_simulated_dcgm_exporter_is_scraped_where_the_gpu_operators_would_be(lab_runs):
    """The SIMULATED DCGM exporter pod runs in the GPU Operator's namespace with its pod label; the observability
    role's DCGM job (unchanged) finds it and labels its series with the node."""
    pods = json.loads(kubectl("-n", SIMULATED_DCGM["namespace"], "get", "pods", "-o", "json"))["items"]
    (pod,) = pods
    assert pod["metadata"]["name"].startswith("tf-lab-simulated-dcgm-exporter-"), pod["metadata"]["name"]
    assert pod["metadata"]["labels"]["tokenfactory.io/simulation"] == "dcgm-exporter"
    assert pod["metadata"]["labels"].items() >= SIMULATED_DCGM["labels"].items()
    assert pod["spec"]["nodeName"] == NODE and pod["status"]["phase"] == "Running"
    targets = scraped_until(lambda targets: [t for t in dcgm_targets(targets) if t["health"] == "up"])
    dcgm = dcgm_targets(targets)
    assert [t["discoveredLabels"]["__meta_kubernetes_pod_name"] for t in dcgm] == [pod["metadata"]["name"]]
    temperature = dashboard_check.query(PROMETHEUS, "DCGM_FI_DEV_GPU_TEMP")
    assert [(r["metric"]["node"], r["metric"]["Hostname"], r["metric"]["modelName"]) for r in temperature] == [
        (NODE, NODE, "NVIDIA GB10")
    ], temperature


def test_health_gate_opens_on_the_cluster_prometheus(lab_runs):
    """playbooks/health_gate.yml against the in-cluster Prometheus (its NodePort), GPU metrics required: the SIMULATED
    DCGM exporter reports the node's GPU (tests/observability closes the gate with the faulty recordings)."""
    proc = run_playbook(
        ROOT / "playbooks/health_gate.yml",
        "-i",
        ROOT / "inventories/lab",
        check=False,
        extra_env={"ANSIBLE_NOCOLOR": "1"},
    )
    out = " ".join(proc.stdout.split())
    assert proc.returncode == 0 and "Health gate open." in out, out[-3000:]
    assert f"1 GPU node(s) ({NODE})" in out, out[-3000:]


def lab_dashboards(tmp_path):
    """The shipped dashboards as roles/observability renders them with the lab inventory: [(dashboard, file)]."""
    facts = render_role(
        tmp_path, "tokenfactory.spark.observability", "render", ["observability_dashboards"],
        inventory=ROOT / "inventories/lab",
    )  # fmt: skip
    out = []
    for uid, text in facts["observability_dashboards"].items():
        (tmp_path / f"{uid}.json").write_text(text)
        out.append((json.loads(text), tmp_path / f"{uid}.json"))
    return out


def dashboard_check_argv(dashboards):
    keys, tls = lab_root() / "tf-lab/api-keys/lab", lab_root() / "tf-lab/tls"
    argv = ["--prometheus", PROMETHEUS, "--gateway", f"https://{HOSTNAME}", "--ca-file", tls / "ca.crt"]
    argv += ["--api-key-file", keys / "validation.key", "--limited-key-file", keys / "rate-limited.key"]
    argv += ["--target", f"{DEPLOYMENT}={MODEL}", "--scrape-interval", "5"]
    argv += [arg for _dashboard, path in dashboards for arg in ("--dashboard", path)]
    argv += [arg for title in NOT_IN_THE_LAB for arg in ("--not-on-this-hardware", title)]
    return list(map(str, argv))


def queries(dashboards):
    return [
        query for dashboard, _path in dashboards for query in dashboard_check.panel_queries(dashboard, [DEPLOYMENT])
    ]


def test_every_dashboard_query_answers_from_the_cluster_prometheus(lab_runs, tmp_path, capsys):
    """Last (its traffic adds tokens the ledger tests compare): lab/dashboard_check sends traffic through the TLS
    Endpoint (streams, an error, a burst on the rate-limited key), then runs every panel query and template variable of
    every shipped dashboard against the in-cluster Prometheus. Only NOT_IN_THE_LAB is left out, and it must be empty."""
    dashboards = lab_dashboards(tmp_path)
    rc = dashboard_check.main(dashboard_check_argv(dashboards))
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rc == 0 and report["without_data"] == [], "\n".join(report["without_data"])
    assert report["statuses"].get("429", 0) >= 1, report["statuses"]
    # The panels left out are exactly the listed ones, and they really have no data here.
    left_out = [(title, expr) for title, expr in queries(dashboards) if title.startswith(tuple(NOT_IN_THE_LAB))]
    assert {entry.split(" / ", 1)[1] for entry in report["not_on_this_hardware"]} == {t for t, _e in left_out}
    assert all(any(title.startswith(prefix) for title, _e in left_out) for prefix in NOT_IN_THE_LAB), left_out
    for title, expr in left_out:
        assert dashboard_check.query(PROMETHEUS, expr) == [], f"{title} has data here: drop it from NOT_IN_THE_LAB"
    # Engine queries: the vLLM branch answers on its own; the NIM and Dynamo branches have nothing for this deployment.
    engine = [(title, expr.split("\nor\n")) for title, expr in queries(dashboards) if "\nor\n" in expr]
    assert engine, "no engine query with vLLM/NIM/Dynamo branches found"
    for title, (vllm, *others) in engine:
        assert dashboard_check.numbers(dashboard_check.query(PROMETHEUS, vllm)), f"{title}: no vLLM data: {vllm}"
        for other in others:
            assert dashboard_check.query(PROMETHEUS, other) == [], f"{title}: {other}"
    not_here = "; ".join(f"{prefix} ({why})" for prefix, why in NOT_IN_THE_LAB.items())
    print(
        f"{report['queries']} dashboard queries and variables answered from the in-cluster Prometheus "
        f"({len(engine)} engine queries also on their vLLM branch alone); not in the lab: {not_here}; "
        f"{OTHER_ENGINE_NAMES}"
    )


def model_deployment():
    return json.loads(
        kubectl("-n", "tokenfactory", "get", "modeldeployments.tokenfactory.io", DEPLOYMENT, "-o", "json")
    )


def deployment_phase():
    md = model_deployment()
    return md.get("status", {}).get("phase"), md.get("status", {}).get("message", "")


def waited(what, check, timeout=180):
    """Seconds until check() is true (lab.wait.wait_until, polled every second)."""
    started = time.monotonic()
    wait_until(check, timeout, what, interval=1)
    return time.monotonic() - started


def routed():
    status, body = https("/v1/models", api_key())
    if status != 200:  # a refusal is a failure, not "not yet"
        raise ProcessDied(f"/v1/models answered {status}: {body[:300]}")
    return MODEL in body


def test_status_keeper_follows_a_failing_rollout_without_a_module_run(lab_runs):
    """A real fault on the live engine Deployment (a new image nothing can pull), no Ansible run: the status keeper
    writes Failed with the pull error and the gateway stops routing the model; `kubectl rollout undo` brings Ready and
    the route back. Its log has no refused write (RBAC)."""
    workload = f"deployment/{DEPLOYMENT}"
    container = engine_pod()["spec"]["containers"][0]["name"]
    assert deployment_phase()[0] == "Ready" and routed()
    kubectl("-n", "tokenfactory", "set", "image", workload, f"{container}=localhost/tokenfactory-absent:0.0.0")
    try:
        failed_s = waited("phase Failed", lambda: deployment_phase()[0] == "Failed")
        message = deployment_phase()[1]
        assert "ErrImagePull" in message or "ImagePullBackOff" in message, message
        unrouted_s = waited("the model left the gateway's routes", lambda: not routed())
    finally:
        kubectl("-n", "tokenfactory", "rollout", "undo", workload)
    ready_s = waited("phase Ready again", lambda: deployment_phase()[0] == "Ready")
    routed_s = waited("the model routed again", routed)
    log = kubectl("-n", "tokenfactory-system", "logs", "deployment/tokenfactory-gateway-status-keeper")
    assert "-> Failed" in log and "-> Ready" in log, log[-3000:]
    assert "status not kept" not in log and "failed: API error" not in log, log[-3000:]
    assert "TLS copy not kept: API error" not in log, log[-3000:]  # its two Roles let it read and write its Secrets
    print(
        f"status keeper: Failed {failed_s:.0f} s after the image change, unrouted {unrouted_s:.0f} s later; "
        f"Ready {ready_s:.0f} s after the undo, routed {routed_s:.0f} s later"
    )


LEDGER_NS = "tokenfactory-system"
LEDGER_ROWS = "COPY (SELECT * FROM usage_records ORDER BY request_id) TO STDOUT"


def ledger_sql(database, sql):
    return kubectl("-n", LEDGER_NS, "exec", "statefulset/tokenfactory-gateway-postgres", "--", "psql", "-U",
                   "tokenfactory", "-d", database, "-Atc", sql)  # fmt: skip


def test_a_ledger_backup_restores_row_for_row_into_a_new_database(lab_runs):
    """The backup CronJob's own Job template run now, its dump on the node's directory, then
    playbooks/restore_ledger.yml into a new (empty) database: every ledger row equal, column for column; a second
    restore into that database is refused by name; the live ledger is not restored over without the confirmation."""
    job = "tf-e2e-ledger-backup"
    kubectl("-n", LEDGER_NS, "create", "job", "--from=cronjob/tokenfactory-gateway-ledger-backup", job)
    try:
        kubectl("-n", LEDGER_NS, "wait", "--for=condition=complete", f"job/{job}", "--timeout=50s")
        log = kubectl("-n", LEDGER_NS, "logs", f"job/{job}")
    finally:
        kubectl("-n", LEDGER_NS, "delete", "job", job, "--wait=false")
    dump = re.search(r"backup (ledger-\d{8}T\d{6}Z\.dump): (\d+) bytes; (\d+) kept \(newest 7\)", log)
    assert dump and int(dump[2]) > 0, log
    on_node = subprocess.run(["podman", "exec", NODE, "ls", "/var/lib/tokenfactory/backups/ledger"], check=True,
                             capture_output=True, text=True, timeout=30).stdout.split()  # fmt: skip
    assert dump[1] in on_node, on_node

    live = ledger_sql("tokenfactory", LEDGER_ROWS)
    assert len(live.splitlines()) >= 32, "the validation's ledger rows are missing"
    inventory = ["-i", ROOT / "inventories/lab"]
    try:
        proc = run_playbook(ROOT / "playbooks/restore_ledger.yml", *inventory, "-e", "tf_restore_database=ledger_copy")
        restored = re.search(r"restored (ledger-\S+) into ledger_copy: (\d+) usage records", proc.stdout)
        assert restored and restored[1] == dump[1], proc.stdout[-3000:]
        assert int(restored[2]) == len(live.splitlines())
        assert ledger_sql("ledger_copy", LEDGER_ROWS) == live

        again = run_playbook(ROOT / "playbooks/restore_ledger.yml", *inventory, "-e", "tf_restore_database=ledger_copy",
                             check=False)  # fmt: skip
        assert again.returncode != 0 and "database ledger_copy exists" in again.stdout, again.stdout[-3000:]
    finally:
        ledger_sql("postgres", "DROP DATABASE IF EXISTS ledger_copy")
    unconfirmed = run_playbook(ROOT / "playbooks/restore_ledger.yml", *inventory, "-e",
                               "tf_restore_database=tokenfactory", check=False)  # fmt: skip
    assert unconfirmed.returncode == 2 and "tf_restore_confirm" in unconfirmed.stdout
    replicas = json.loads(kubectl("-n", LEDGER_NS, "get", "deployment", "tokenfactory-gateway", "-o", "json"))
    assert replicas["spec"]["replicas"] == replicas["status"].get("readyReplicas"), replicas["status"]
    print(f"ledger backup: {dump[1]} {dump[2]} bytes; restored {restored[2]} rows equal to the live ledger")


def kubectl_apply(obj):
    """`kubectl apply` of obj on the lab node, as a user or a GitOps tool changes an object (not the module)."""
    subprocess.run(
        ["podman", "exec", "-i", NODE, "kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf", "apply", "-f", "-"],
        input=json.dumps(obj), capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip


def with_spec(md, **changes):
    """md as a user would apply it: its name, labels and spec, with `changes` in the spec."""
    meta = {k: md["metadata"][k] for k in ("name", "namespace", "labels") if k in md["metadata"]}
    return {"apiVersion": md["apiVersion"], "kind": md["kind"], "metadata": meta, "spec": {**md["spec"], **changes}}


def engine_pod_ready_with(argument, not_named):
    """The only engine pod, Ready, not `not_named`, started with `argument` (None while the rollout goes on)."""
    pods = lab_run.engine_pods(NODE, "tokenfactory", DEPLOYMENT)
    if len(pods) != 1 or pods[0]["metadata"]["name"] == not_named or pods[0]["metadata"].get("deletionTimestamp"):
        return None
    (pod,) = pods
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))
    return pod if ready and argument in pod["spec"]["containers"][0]["args"] else None


def planned_ready(generation):
    status = model_deployment()["status"]
    return status.get("phase") == "Ready" and status["plan"]["generation"] == generation


def test_a_model_deployment_changed_with_kubectl_rolls_its_pods_through_the_keeper_and_the_module_agrees(lab_runs):
    """GitOps on the real cluster, no Ansible run: `kubectl apply` of the ModelDeployment with a new engine argument
    rolls the engine pod within the keeper's interval (the plan's generation follows) and the gateway routes the new
    pod; the module run with that spec afterwards changes nothing; an apply asking for more GPUs than the lab's one
    GB10 is refused in status with the reason, the running pod untouched. (A new replica count that fits needs a
    second GPU: the pair lab; tests/modules/test_lab_status_keeper.py covers the count against the API server.)"""
    md, before = model_deployment(), engine_pod()
    argument = "--max-num-seqs=8"
    extra_args = [*md["spec"].get("extraArgs", []), argument]
    kubectl_apply(with_spec(md, extraArgs=extra_args))
    rolled_s = waited("the engine pod rolled with the new argument",
                      lambda: engine_pod_ready_with(argument, before["metadata"]["name"]), timeout=600)  # fmt: skip
    changed = model_deployment()
    assert changed["metadata"]["generation"] == md["metadata"]["generation"] + 1
    ready_s = waited("the plan of the new generation, Ready", lambda: planned_ready(changed["metadata"]["generation"]))
    # The gateway dropped the model while the rollout ran (status not Ready) and routes it again at its next refresh.
    routed_s = waited("the model routed again", routed)
    new_pod = engine_pod()
    prompt_before = lab_run.pod_token_counters(NODE, new_pod)[0]
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8}
    status, answer = https("/v1/chat/completions", api_key(), body, timeout=60)
    assert status == 200 and json.loads(answer)["choices"][0]["message"]["content"], answer
    assert lab_run.pod_token_counters(NODE, new_pod)[0] > prompt_before, "the request did not reach the new pod"

    # The module with the spec kubectl applied: the keeper applied what the module would, so nothing changes.
    module = run_playbook(ROOT / "playbooks/serve.yml", "-i", ROOT / "inventories/lab", "--tags", "model_deployment",
                          "-e", json.dumps({"tf_engine_extra_args": extra_args}))  # fmt: skip
    assert play_recap(module.stdout)["localhost"]["changed"] == 0, module.stdout[-4000:]

    # Two replicas of one GPU each on a node with one GB10: refused in status, the running Deployment untouched.
    workload_version = json.loads(kubectl("-n", "tokenfactory", "get", "deployment", DEPLOYMENT, "-o", "json"))[
        "metadata"]["resourceVersion"]  # fmt: skip
    kubectl_apply(with_spec(model_deployment(), replicas=2))
    waited("the refusal in status", lambda: "refused" in model_deployment()["status"], timeout=120)
    refused = model_deployment()
    assert refused["status"]["refused"]["generation"] == refused["metadata"]["generation"], refused["status"]
    assert "needs 2 x NVIDIA-GB10 but the compute cluster has 1 allocatable" in refused["status"]["refused"]["reason"]
    assert refused["status"]["plan"]["generation"] == changed["metadata"]["generation"]
    time.sleep(25)  # two more passes of the keeper (10 s interval): still nothing applied
    after = json.loads(kubectl("-n", "tokenfactory", "get", "deployment", DEPLOYMENT, "-o", "json"))
    assert after["metadata"]["resourceVersion"] == workload_version
    assert engine_pod()["metadata"]["name"] == new_pod["metadata"]["name"]
    log = kubectl("-n", "tokenfactory-system", "logs", "deployment/tokenfactory-gateway-status-keeper")
    assert "failed: API error" not in log and "status not kept" not in log, log[-3000:]
    print(
        f"kubectl apply: engine pod rolled in {rolled_s:.0f} s, plan Ready {ready_s:.0f} s later, routed again "
        f"{routed_s:.0f} s later; replicas 2 refused: {refused['status']['refused']['reason']}"
    )
