"""`make lab` as a test (marker e2e): lab-clean, a cold run, a warm run, checks, lab-clean, on the inventory
TF_E2E_INVENTORY names (tests/e2e/lab_run.py's E2E_INVENTORY): `make test-e2e` runs inventories/lab-pair, two podman
Sparks cabled by the SIMULATED ConnectX-7 link (an internal podman network with the link's MTU);
`make test-e2e-single` runs inventories/lab, one node. `make lab` creates the podman Spark hosts
(lab/hosts.yml, SIMULATED GPU and driver), then runs the product unchanged -
`ansible-playbook -i <inventory> tokenfactory.spark.site` - on them: kubeadm init on the first, the second joined over
the link, bridge CNI, the gateway, PostgreSQL, Redis, Prometheus and the CPU vLLM engine as pods (one replica per
node), the tenant and key, validation over HTTPS through the Endpoint; then the ledger beside the engine pods'
counters (lab/ledger.yml). The checks that only a pair has skip on one node, naming why. See docs/lab.md."""

import concurrent.futures
import ipaddress
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

from lab import dashboard_check
from lab.paths import lab_root, tf_cache
from lab.wait import ProcessDied, wait_until
from tests.awx.awx_runner import job_template, node_extra_vars, run_job
from tests.awx.test_awx_style_runs import awx_project  # noqa: F401 # pylint: disable=unused-import
from tests.e2e import lab_run
from tests.e2e.lab_run import ledger
from tests.playbooks.ansible_run import ROOT, play_recap, render_role, run_playbook
from lab.versions import kube_tag, pinned

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(5400)]
# Dashboard panels (title prefixes) the lab cannot fill, each with the reason; every other query must answer.
NOT_IN_THE_LAB = {
    "GPU framebuffer used": "a GB10 has no framebuffer: DCGM registers no FB_* fields for it (lab/fixtures/dcgm/"
    "README.md); tests/observability/test_dashboards_live.py answers it from the H100 recording",
}
# Each engine query is an `or` chain over vLLM, NVIDIA NIM and NVIDIA Dynamo names: the lab proves the vLLM branch on
# its own; the other branches stay empty here (the lab runs vLLM), and test_dashboards_live.py proves them.
OTHER_ENGINE_NAMES = "NIM and Dynamo branches: the lab runs vLLM; tests/observability/test_dashboards_live.py"
NEEDS_A_PAIR = "a second node (and GPU) is the pair's: inventories/lab-pair"


def lab():
    return lab_run.lab()


def value(name):
    return lab().values[name]


def kubectl(*args, stdin=None):
    return lab_run.kubectl(lab().control_plane, *args, stdin=stdin)


def engine_pods():
    return lab_run.engine_pods(lab().control_plane, value("tf_namespace"), value("tf_model_deployment"))


def engine_counters():
    """(prompt, generation) tokens summed over the engine pods, with each pod's own pair."""
    counters = [lab_run.pod_token_counters(lab().control_plane, pod) for pod in engine_pods()]
    return tuple(map(sum, zip(*counters, strict=True))), counters


def prometheus():
    return f"http://{lab().addresses[lab().control_plane]}:30909"


def parts(output):
    return lab_run.parts(output, lab().inventory)


@pytest.fixture(scope="module")
def lab_runs():
    inventory = lab().inventory
    lab_run.make("lab-clean", inventory)
    cold, cold_s = lab_run.make("lab", inventory)
    warm, warm_s = lab_run.make("lab", inventory)
    yield {"cold": cold, "warm": warm, "cold_s": cold_s, "warm_s": warm_s}
    lab_run.make("lab-clean", inventory)


def https(path, api_key=None, body=None, timeout=30):
    """A request to the public Endpoint from this machine: its hostname (SNI), verified against the lab CA only; a
    POST of `body` as JSON when given. (status, text)"""
    context = ssl.create_default_context(cafile=str(lab().ca_file))
    request = urllib.request.Request(f"https://{value('tf_endpoint_hostname')}{path}")
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
    return lab().key_file().read_text().strip()


def test_simulation_boundary_is_printed_first(lab_runs):
    out = lab_runs["cold"]
    first_task = out.index("TASK [")
    assert out.index("SIMULATED: GPU and its driver") < out.index("TASK [", first_task + 1)
    banner = " ".join(out[: out.index("TASK [", first_task + 1)].split())
    assert "SIMULATED" in banner and banner.count("SIMULATED:") == 1, banner
    link = value("tf_lab_link")
    if link:
        assert f"is the internal podman network {link['name']}" in banner, banner


def test_cold_run_succeeds_and_changes_things_on_every_node(lab_runs):
    for part, text in parts(lab_runs["cold"]).items():
        hosts = play_recap(text)
        assert all(h["failed"] == 0 and h["unreachable"] == 0 for h in hosts.values()), (part, hosts)
    product = play_recap(parts(lab_runs["cold"])["product"])
    assert all(product[node]["changed"] > 0 for node in lab().nodes), product


def test_warm_run_changes_nothing(lab_runs):
    """Every playbook of the warm run - lab/hosts.yml, the product's site.yml, lab/ledger.yml - has changed=0."""
    for part, text in parts(lab_runs["warm"]).items():
        hosts = play_recap(text)
        assert all(h["changed"] == 0 and h["failed"] == 0 for h in hosts.values()), (part, hosts)
    print(f"{lab().name} cold {lab_runs['cold_s']:.0f} s, warm {lab_runs['warm_s']:.0f} s")


def test_host_roles_and_kubeadm_ran_on_the_podman_sparks_over_ssh(lab_runs):
    product = parts(lab_runs["cold"])["product"]
    facts = product.split("preflight_facts:")[1][:800]
    assert "gpu_product: NVIDIA-GB10" in facts and "unified_memory: true" in facts
    nodes = {n["metadata"]["name"]: n for n in json.loads(kubectl("get", "nodes", "-o", "json"))["items"]}
    assert sorted(nodes) == sorted(lab().nodes)
    for name in lab().nodes:
        for role in ("preflight", "host_prep", "containerd", "kubernetes", "cni"):
            task = rf"TASK \[tokenfactory\.spark\.{role} : .*\n(?:(?!TASK \[).*\n)*?(ok|changed): \[{name}\]"
            assert re.search(task, product), (role, name)
        node = nodes[name]
        assert node["status"]["nodeInfo"]["kubeletVersion"] == kube_tag()
        assert {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"] == "True", name
        # SIMULATED GPU capacity and the labels GPU feature discovery would set, verified by the gpu_operator role
        # (a worker's advertised with its own kubelet credentials).
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "1", name
        assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-GB10"
        assert re.search(rf"{name}: 1 x NVIDIA-GB10", product), name


def test_the_worker_joined_over_the_simulated_link(lab_runs):
    """Each node's InternalIP is on the link; inside the worker the link has the CX-7 port's name, the link's MTU and
    the address kubeadm joined with."""
    if not lab().is_pair:
        pytest.skip(NEEDS_A_PAIR)
    link = ipaddress.ip_network(value("connectx_link_cidr"))
    nodes = {n["metadata"]["name"]: n for n in json.loads(kubectl("get", "nodes", "-o", "json"))["items"]}
    internal = {name: [a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP"]
                for name, node in nodes.items()}  # fmt: skip
    for name, addresses in internal.items():
        assert len(addresses) == 1 and ipaddress.ip_address(addresses[0]) in link, (name, addresses)
    worker = lab().nodes[1]
    shown = json.loads(lab_run.on_node(worker, "ip", "-j", "addr", "show", "dev", value("tf_lab_link")["interface"]))
    assert shown[0]["mtu"] == int(value("connectx_mtu"))
    assert internal[worker][0] in [a["local"] for a in shown[0]["addr_info"]]


def test_platform_and_one_engine_pod_per_node_run_as_pods(lab_runs):
    pods = json.loads(kubectl("get", "pods", "-A", "-o", "json"))["items"]
    running = {
        (p["metadata"]["namespace"], p["metadata"]["labels"].get("app.kubernetes.io/name", p["metadata"]["name"]))
        for p in pods
        if p["status"]["phase"] == "Running" and p["spec"].get("nodeName") in lab().nodes
    }
    names = " ".join(f"{ns}/{name}" for ns, name in sorted(running))
    for wanted in ("tokenfactory-system/tokenfactory-gateway", "postgres", "redis", "prometheus"):
        assert wanted in names, names
    engines = engine_pods()
    # Each replica requests its node's one (SIMULATED) GPU, so the scheduler puts one on each Spark.
    assert sorted(pod["spec"]["nodeName"] for pod in engines) == sorted(lab().nodes)
    for pod in engines:
        container = pod["spec"]["containers"][0]
        assert pod["status"]["phase"] == "Running", pod["metadata"]["name"]
        assert ready(pod), pod["metadata"]["name"]
        assert container["image"] == f"localhost/tokenfactory-vllm-cpu:{pinned('vllm')}"
        assert container["command"] == ["vllm", "serve"] and "--enforce-eager" in container["args"]
        assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_the_gateway_archive_is_in_every_nodes_containerd_under_its_ref_and_digest(lab_runs):
    """gateway_image_source=archive without a registry: cluster.yml's image play put the archive scripts/build-service-
    images made into each node's containerd, where the kubelet found it (the warm run, changed=0, loaded nothing)."""
    gateway = json.loads(
        kubectl("-n", "tokenfactory-system", "get", "deployment", "tokenfactory-gateway", "-o", "json")
    )
    ref = gateway["spec"]["template"]["spec"]["containers"][0]["image"]
    entry = next(e for e in json.loads((tf_cache() / "images/images.json").read_text()) if e["ref"] == ref)
    for node in lab().nodes:
        listed = lab_run.on_node(node, "ctr", "-n", "k8s.io", "images", "ls")
        (line,) = [row for row in listed.splitlines() if row.startswith(f"{ref} ")]
        assert entry["digest"] in line, (node, line)


def test_endpoint_serves_https_with_its_certificate_and_only_the_openai_routes(lab_runs):
    """From this machine, by the Endpoint's hostname (SNI) and the lab CA: /v1 answers, admin API and metrics do not."""
    hostname = value("tf_endpoint_hostname")
    status, body = https("/v1/models", api_key())
    assert status == 200 and value("tf_served_model_name") in body, (status, body)
    with socket.create_connection((hostname, 443), timeout=10) as raw:
        context = ssl.create_default_context(cafile=str(lab().ca_file))
        with context.wrap_socket(raw, server_hostname=hostname) as tls:
            names = [name for kind, name in tls.getpeercert()["subjectAltName"] if kind == "DNS"]
    assert names == [hostname]
    for path in ("/admin/v1/tenants", "/metrics", "/healthz", "/readyz"):
        status, _body = https(path, api_key())
        assert status in (403, 404), (path, status)


def models_on(address):
    """GET /v1/models from this machine on `address`:443 by the Endpoint's hostname (SNI), trusting the lab CA only."""
    hostname = value("tf_endpoint_hostname")
    context = ssl.create_default_context(cafile=str(lab().ca_file))
    request = f"GET /v1/models HTTP/1.1\r\nHost: {hostname}\r\n"
    request += f"Authorization: Bearer {api_key()}\r\nConnection: close\r\n\r\n"
    with (
        socket.create_connection((address, 443), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=hostname) as tls,
    ):
        tls.sendall(request.encode())
        return b"".join(iter(lambda: tls.recv(65536), b"")).decode()


def test_the_endpoint_answers_on_every_sparks_management_address(lab_runs):
    """The gateway's externalIPs are the management addresses (inventories/spark-pair: the node IPs are the link's), so
    the Endpoint answers on each Spark's; its name resolves to the first (lab/hosts.yml's /etc/hosts line)."""
    for node, address in lab().addresses.items():
        answer = models_on(address)
        assert answer.startswith("HTTP/1.1 200") and value("tf_served_model_name") in answer, (node, answer[:300])
    assert socket.gethostbyname(value("tf_endpoint_hostname")) == lab().addresses[lab().control_plane]


def test_validation_went_through_the_tls_endpoint_to_every_engine_pod_and_the_ledger_is_their_sum(lab_runs):
    """The gateway spread the validation traffic over the replicas (each pod's own counters rose), and every token the
    engine pods counted went through the gateway and was metered: ledger = the sum over the pods, on both runs."""
    product = parts(lab_runs["cold"])["product"]
    assert f"tf_endpoint_base_url: https://{value('tf_endpoint_hostname')}/v1" in product.split("CUSTOM STATS")[-1]
    requests = value("tf_validate_requests")
    cold, warm = ledger(lab_runs["cold"]), ledger(lab_runs["warm"])
    assert cold[0] >= requests and cold[1] > 0 and cold[2] > 0 and cold[3] > 0, cold
    # The warm run's validation requests are added to the same tenant's ledger (nothing was reset).
    assert warm[0] >= cold[0] + requests and warm[3] > cold[3], (cold, warm)
    for run in (cold, warm):
        assert (run[1], run[2]) == (run[4], run[5]), run
    # Read again, straight from the pods now (nothing has generated tokens since the warm run).
    total, counters = engine_counters()
    assert all(prompt > 0 and generation > 0 for prompt, generation in counters), counters
    assert total == (warm[1], warm[2]), (counters, warm)
    print(f"engine pods' (prompt, generation) tokens: {counters}; ledger: {warm[1]} + {warm[2]}")


def test_prometheus_in_the_cluster_scrapes_the_engine_and_gateway_pods(lab_runs):
    engines = {pod["metadata"]["name"] for pod in engine_pods()}

    def engines_and_gateway_up(targets):
        up = {
            t["discoveredLabels"].get("__meta_kubernetes_pod_name", ""): t["scrapePool"]
            for t in targets
            if t["health"] == "up" and "__meta_kubernetes_pod_name" in t["discoveredLabels"]
        }
        return engines <= up.keys() and [pod for pod in up if pod.startswith("tokenfactory-gateway-")]

    scraped_until(engines_and_gateway_up)
    for engine in engines:
        result = dashboard_check.query(prometheus(), f'vllm:generation_tokens_total{{pod="{engine}"}}')
        assert result and float(result[0]["value"][1]) > 0, (engine, result)


def test_validation_summary_reports_and_set_stats(lab_runs):
    out = parts(lab_runs["cold"])["product"]
    requests = value("tf_validate_requests")
    assert "VALIDATION REPORT" in out
    assert re.search(rf"qwen2-0-5b-instruct\s+localhost\s+{requests}/{requests}", out), "every request must succeed"
    reports = re.search(r"reports: (\S+\.json), (\S+\.xml), (\S+\.html)", out)
    assert reports, "report paths not printed"
    for path in reports.groups():
        assert (ROOT / path).is_file(), path
    stats = out.split("CUSTOM STATS")[-1]
    assert "tf_validation" in stats and "tf_endpoint_base_url" in stats


def test_api_key_file_is_0600_and_never_printed(lab_runs):
    path = lab().key_file()
    assert path.stat().st_mode & 0o777 == 0o600
    secret = api_key()
    assert len(secret) >= 32
    reports = "".join(p.read_text() for p in (ROOT / "reports" / lab().name).glob(f"{lab().name}.*"))
    assert reports, f"no reports in reports/{lab().name}"
    for where, text in (("cold", lab_runs["cold"]), ("warm", lab_runs["warm"]), ("reports", reports)):
        assert secret not in text, f"the API key was printed in the {where} output"


def test_validate_runs_awx_style_with_survey_answers(lab_runs, awx_project, tmp_path):  # noqa: F811 - fixture
    """validate.yml as AWX runs it against the lab: synced project, ansible-runner, survey answers, no terminal."""
    project, env = awx_project
    template = job_template("Token Factory - validate deployment")
    answers = {"tf_validate_requests": 8, "tf_validate_fail_on_breach": "false"}
    job = run_job(
        template, tmp_path / "job", project, project / lab().inventory / "hosts.yml",
        node_extra_vars(template, workflow_vars=answers), envvars=env,
    )  # fmt: skip
    assert job.runner.status == "successful", job.stdout[-4000:]
    assert "qwen2-0-5b-instruct: 8/8 ok" in job.stdout
    assert job.artifacts["tf_validation"]["deployment"] == "qwen2-0-5b-instruct"


def scraped_until(done, timeout=120):
    """The in-cluster Prometheus's active targets once done(targets) holds (a timeout names the last targets)."""

    def check():
        url = f"{prometheus()}/api/v1/targets?state=active"
        with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 - the lab's NodePort
            targets = json.loads(answer.read())["data"]["activeTargets"]
        assert done(targets), targets  # not yet: wait_until reports the last one on timeout
        return targets

    return wait_until(check, timeout, "the in-cluster Prometheus's targets", interval=5)


def dcgm_targets(targets):
    return [t for t in targets if t["scrapePool"] == "tokenfactory-dcgm"]


def test_the_simulated_dcgm_exporter_is_scraped_where_the_gpu_operators_would_be(lab_runs):
    """A SIMULATED DCGM exporter pod per node runs in the GPU Operator's namespace with its pod label; the observability
    role's DCGM job (unchanged) finds each and labels its series with the node."""
    simulated = value("tf_lab_simulated_dcgm_exporter")
    pods = json.loads(kubectl("-n", simulated["namespace"], "get", "pods", "-o", "json"))["items"]
    assert sorted(pod["spec"]["nodeName"] for pod in pods) == sorted(lab().nodes)
    for pod in pods:
        assert pod["metadata"]["name"].startswith("tf-lab-simulated-dcgm-exporter-"), pod["metadata"]["name"]
        assert pod["metadata"]["labels"]["tokenfactory.io/simulation"] == "dcgm-exporter"
        assert pod["metadata"]["labels"].items() >= simulated["labels"].items()
        assert pod["status"]["phase"] == "Running", pod["metadata"]["name"]
    names = sorted(pod["metadata"]["name"] for pod in pods)

    def every_exporter_up(targets):
        return sorted(t["discoveredLabels"]["__meta_kubernetes_pod_name"] for t in dcgm_targets(targets)
                      if t["health"] == "up") == names  # fmt: skip

    targets = scraped_until(every_exporter_up)
    assert sorted(t["discoveredLabels"]["__meta_kubernetes_pod_name"] for t in dcgm_targets(targets)) == names
    temperature = dashboard_check.query(prometheus(), "DCGM_FI_DEV_GPU_TEMP")
    assert sorted((r["metric"]["node"], r["metric"]["Hostname"], r["metric"]["modelName"]) for r in temperature) == [
        (node, node, "NVIDIA GB10") for node in sorted(lab().nodes)
    ], temperature


def test_health_gate_opens_on_the_cluster_prometheus(lab_runs):
    """playbooks/health_gate.yml against the in-cluster Prometheus (its NodePort), GPU metrics required: the SIMULATED
    DCGM exporters report each node's GPU (tests/observability closes the gate with the faulty recordings)."""
    proc = run_playbook(
        ROOT / "playbooks/health_gate.yml",
        "-i",
        ROOT / lab().inventory,
        check=False,
        extra_env={"ANSIBLE_NOCOLOR": "1"},
    )
    out = " ".join(proc.stdout.split())
    assert proc.returncode == 0 and "Health gate open." in out, out[-3000:]
    assert f"{len(lab().nodes)} GPU node(s) ({', '.join(lab().nodes)})" in out, out[-3000:]


def lab_dashboards(tmp_path):
    """The shipped dashboards as roles/observability renders them with the lab inventory: [(dashboard, file)]."""
    facts = render_role(
        tmp_path, "tokenfactory.spark.observability", "render", ["observability_dashboards"],
        inventory=ROOT / lab().inventory,
    )  # fmt: skip
    out = []
    for uid, text in facts["observability_dashboards"].items():
        (tmp_path / f"{uid}.json").write_text(text)
        out.append((json.loads(text), tmp_path / f"{uid}.json"))
    return out


def dashboard_check_argv(dashboards):
    argv = ["--prometheus", prometheus(), "--gateway", f"https://{value('tf_endpoint_hostname')}"]
    argv += ["--ca-file", lab().ca_file, "--api-key-file", lab().key_file()]
    argv += ["--limited-key-file", lab().key_file("rate-limited")]
    argv += ["--target", f"{value('tf_model_deployment')}={value('tf_served_model_name')}", "--scrape-interval", "5"]
    argv += [arg for _dashboard, path in dashboards for arg in ("--dashboard", path)]
    argv += [arg for title in NOT_IN_THE_LAB for arg in ("--not-on-this-hardware", title)]
    return list(map(str, argv))


def queries(dashboards):
    return [
        query
        for dashboard, _path in dashboards
        for query in dashboard_check.panel_queries(dashboard, [value("tf_model_deployment")])
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
        assert dashboard_check.query(prometheus(), expr) == [], f"{title} has data here: drop it from NOT_IN_THE_LAB"
    # Engine queries: the vLLM branch answers on its own; the NIM and Dynamo branches have nothing for this deployment.
    engine = [(title, expr.split("\nor\n")) for title, expr in queries(dashboards) if "\nor\n" in expr]
    assert engine, "no engine query with vLLM/NIM/Dynamo branches found"
    for title, (vllm, *others) in engine:
        assert dashboard_check.numbers(dashboard_check.query(prometheus(), vllm)), f"{title}: no vLLM data: {vllm}"
        for other in others:
            assert dashboard_check.query(prometheus(), other) == [], f"{title}: {other}"
    not_here = "; ".join(f"{prefix} ({why})" for prefix, why in NOT_IN_THE_LAB.items())
    print(
        f"{report['queries']} dashboard queries and variables answered from the in-cluster Prometheus "
        f"({len(engine)} engine queries also on their vLLM branch alone); not in the lab: {not_here}; "
        f"{OTHER_ENGINE_NAMES}"
    )


def model_deployment():
    return json.loads(
        kubectl("-n", value("tf_namespace"), "get", "modeldeployments.tokenfactory.io", value("tf_model_deployment"),
                "-o", "json")
    )  # fmt: skip


def engine_workload():
    return json.loads(kubectl("-n", value("tf_namespace"), "get", "deployment", value("tf_model_deployment"), "-o",
                              "json"))  # fmt: skip


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
    return value("tf_served_model_name") in body


def test_status_keeper_follows_a_failing_rollout_without_a_module_run(lab_runs):
    """A real fault on the live engine Deployment (a new image nothing can pull), no Ansible run: the status keeper
    writes Failed with the pull error and the gateway stops routing the model; `kubectl rollout undo` brings Ready and
    the route back. Its log has no refused write (RBAC)."""
    namespace, workload = value("tf_namespace"), f"deployment/{value('tf_model_deployment')}"
    container = engine_pods()[0]["spec"]["containers"][0]["name"]
    assert deployment_phase()[0] == "Ready" and routed()
    kubectl("-n", namespace, "set", "image", workload, f"{container}=localhost/tokenfactory-absent:0.0.0")
    try:
        failed_s = waited("phase Failed", lambda: deployment_phase()[0] == "Failed")
        message = deployment_phase()[1]
        assert "ErrImagePull" in message or "ImagePullBackOff" in message, message
        unrouted_s = waited("the model left the gateway's routes", lambda: not routed())
    finally:
        kubectl("-n", namespace, "rollout", "undo", workload)
    ready_s = waited("phase Ready again", lambda: deployment_phase()[0] == "Ready", timeout=600)
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
    """The backup CronJob's own Job template run now, its dump on its node's directory, then
    playbooks/restore_ledger.yml into a new (empty) database: every ledger row equal, column for column; a second
    restore into that database is refused by name; the live ledger is not restored over without the confirmation."""
    job = "tf-e2e-ledger-backup"
    kubectl("-n", LEDGER_NS, "create", "job", "--from=cronjob/tokenfactory-gateway-ledger-backup", job)
    try:
        kubectl("-n", LEDGER_NS, "wait", "--for=condition=complete", f"job/{job}", "--timeout=50s")
        log = kubectl("-n", LEDGER_NS, "logs", f"job/{job}")
        pods = json.loads(kubectl("-n", LEDGER_NS, "get", "pods", "-l", f"job-name={job}", "-o", "json"))["items"]
        (pod,) = [p for p in pods if p["status"]["phase"] == "Succeeded"]  # the pod that wrote the dump
    finally:
        kubectl("-n", LEDGER_NS, "delete", "job", job, "--wait=false")
    dump = re.search(r"backup (ledger-\d{8}T\d{6}Z\.dump): (\d+) bytes; (\d+) kept \(newest 7\)", log)
    assert dump and int(dump[2]) > 0, log
    on_node = lab_run.on_node(pod["spec"]["nodeName"], "ls", "/var/lib/tokenfactory/backups/ledger", timeout=30).split()
    assert dump[1] in on_node, on_node

    live = ledger_sql("tokenfactory", LEDGER_ROWS)
    assert len(live.splitlines()) >= value("tf_validate_requests"), "the validation's ledger rows are missing"
    inventory = ["-i", ROOT / lab().inventory]
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
    print(f"ledger backup: {dump[1]} {dump[2]} bytes on {pod['spec']['nodeName']}; restored {restored[2]} rows equal "
          "to the live ledger")  # fmt: skip


def kubectl_apply(obj):
    """`kubectl apply` of obj on the control plane, as a user or a GitOps tool changes an object (not the module)."""
    kubectl("apply", "-f", "-", stdin=json.dumps(obj))


def with_spec(md, **changes):
    """md as a user would apply it: its name, labels and spec, with `changes` in the spec."""
    meta = {k: md["metadata"][k] for k in ("name", "namespace", "labels") if k in md["metadata"]}
    return {"apiVersion": md["apiVersion"], "kind": md["kind"], "metadata": meta, "spec": {**md["spec"], **changes}}


def ready(pod):
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))


def engine_pods_ready(count, argument, not_named=()):
    """The engine pods once exactly `count` exist, each Ready, started with `argument` and none of `not_named` (None
    while the rollout goes on)."""
    pods = engine_pods()
    if len(pods) != count or any(p["metadata"].get("deletionTimestamp") for p in pods):
        return None
    fresh = [
        p for p in pods if p["metadata"]["name"] not in not_named and argument in p["spec"]["containers"][0]["args"]
    ]
    return pods if len(fresh) == count and all(map(ready, pods)) else None


def planned_ready(generation):
    status = model_deployment()["status"]
    return status.get("phase") == "Ready" and status["plan"]["generation"] == generation


def applied(changes, count, argument, not_named=()):
    """kubectl apply of the ModelDeployment with `changes`; waits for `count` engine pods Ready with `argument`, the
    plan of the new generation Ready and the route. (pods, seconds to roll, to plan, to route)"""
    md = model_deployment()
    kubectl_apply(with_spec(md, **changes))
    rolled_s = waited(f"{count} engine pod(s) Ready with {argument}",
                      lambda: engine_pods_ready(count, argument, not_named), timeout=600)  # fmt: skip
    generation = model_deployment()["metadata"]["generation"]
    assert generation == md["metadata"]["generation"] + 1
    ready_s = waited("the plan of the new generation, Ready", lambda: planned_ready(generation))
    # The gateway dropped the model while the rollout ran (status not Ready) and routes it again at its next refresh.
    routed_s = waited("the model routed again", routed)
    return engine_pods_ready(count, argument, not_named), rolled_s, ready_s, routed_s


def chat():
    body = {"model": value("tf_served_model_name"), "messages": [{"role": "user", "content": "Say hello."}],
            "max_tokens": 8}  # fmt: skip
    status, answer = https("/v1/chat/completions", api_key(), body, timeout=60)
    assert status == 200 and json.loads(answer)["choices"][0]["message"]["content"], answer


def served_by(pod, rounds=6, concurrency=8):
    """Concurrent chats through the Endpoint until `pod`'s own prompt counter rises (kube-proxy spreads the gateway's
    new upstream connections over the replicas, not its requests); the number of rounds it took."""
    before = lab_run.pod_token_counters(lab().control_plane, pod)[0]
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        for attempt in range(1, rounds + 1):
            list(pool.map(lambda _i: chat(), range(concurrency)))
            if lab_run.pod_token_counters(lab().control_plane, pod)[0] > before:
                return attempt
    raise AssertionError(f"{rounds} x {concurrency} chats through the Endpoint, none reached {pod['metadata']['name']}")


def module_run_changes_nothing(extra_args):
    """The module with the spec kubectl applied: the keeper applied what the module would, so nothing changes."""
    module = run_playbook(ROOT / "playbooks/serve.yml", "-i", ROOT / lab().inventory, "--tags", "model_deployment",
                          "-e", json.dumps({"tf_engine_extra_args": extra_args}))  # fmt: skip
    assert play_recap(module.stdout)["localhost"]["changed"] == 0, module.stdout[-4000:]


ARGUMENT = "--max-num-seqs=8"


def test_a_model_deployment_changed_with_kubectl_rolls_its_pods_through_the_keeper_and_the_module_agrees(lab_runs):
    """GitOps on the real cluster, no Ansible run: `kubectl apply` of the ModelDeployment with a new engine argument
    rolls every engine pod within the keeper's interval (the plan's generation follows) and the gateway routes the new
    pods; the module run with that spec afterwards changes nothing; an apply asking for more GPUs than the lab has is
    refused in status with the reason, the running pods untouched."""
    md, gpus = model_deployment(), len(lab().nodes)
    before = {pod["metadata"]["name"] for pod in engine_pods()}
    extra_args = [*md["spec"].get("extraArgs", []), ARGUMENT]
    pods, rolled_s, ready_s, routed_s = applied({"extraArgs": extra_args}, gpus, ARGUMENT, before)
    rounds = [served_by(pod) for pod in pods]
    module_run_changes_nothing(extra_args)

    # One more replica of one GPU each than the lab has GB10s: refused in status, the running Deployment untouched.
    workload_version = engine_workload()["metadata"]["resourceVersion"]
    planned = model_deployment()["status"]["plan"]["generation"]
    kubectl_apply(with_spec(model_deployment(), replicas=gpus + 1))
    waited("the refusal in status", lambda: "refused" in model_deployment()["status"], timeout=120)
    refused = model_deployment()
    assert refused["status"]["refused"]["generation"] == refused["metadata"]["generation"], refused["status"]
    wanted = f"needs {gpus + 1} x NVIDIA-GB10 but the compute cluster has {gpus} allocatable"
    assert wanted in refused["status"]["refused"]["reason"], refused["status"]
    assert refused["status"]["plan"]["generation"] == planned
    time.sleep(25)  # two more passes of the keeper (10 s interval): still nothing applied
    assert engine_workload()["metadata"]["resourceVersion"] == workload_version
    assert {pod["metadata"]["name"] for pod in engine_pods()} == {pod["metadata"]["name"] for pod in pods}
    log = kubectl("-n", "tokenfactory-system", "logs", "deployment/tokenfactory-gateway-status-keeper")
    assert "failed: API error" not in log and "status not kept" not in log, log[-3000:]
    kubectl_apply(with_spec(model_deployment(), replicas=gpus))  # back to the module's spec (the next test's start)
    waited("the refusal cleared", lambda: planned_ready(model_deployment()["metadata"]["generation"]), timeout=120)
    print(
        f"kubectl apply: {gpus} engine pod(s) rolled in {rolled_s:.0f} s, plan Ready {ready_s:.0f} s later, routed "
        f"again {routed_s:.0f} s later, each served a chat within {max(rounds)} round(s); replicas {gpus + 1} "
        f"refused: {refused['status']['refused']['reason']}"
    )


def test_a_new_replica_count_applied_with_kubectl_removes_and_adds_real_pods(lab_runs):
    """GitOps on the pair: `kubectl apply` of replicas 1 removes a running engine pod (the other keeps serving), then
    replicas 2 starts a new real pod on the freed Spark, which the gateway reaches through the Endpoint; the plan's
    generation follows each apply and the module run with the inventory's spec afterwards changes nothing."""
    if not lab().is_pair:
        pytest.skip(NEEDS_A_PAIR)
    md, before = model_deployment(), engine_pods()
    assert len(before) == 2 and ARGUMENT in md["spec"]["extraArgs"], (md["spec"], before)
    (kept,), down_s, down_ready_s, down_routed_s = applied({"replicas": 1}, 1, ARGUMENT)
    assert kept["metadata"]["name"] in {pod["metadata"]["name"] for pod in before}
    freed = ({pod["spec"]["nodeName"] for pod in before} - {kept["spec"]["nodeName"]}).pop()
    assert served_by(kept) >= 1
    assert model_deployment()["status"]["plan"]["replicas"] == 1, model_deployment()["status"]["plan"]

    pods, up_s, up_ready_s, up_routed_s = applied({"replicas": 2}, 2, ARGUMENT)
    (added,) = [pod for pod in pods if pod["metadata"]["name"] != kept["metadata"]["name"]]
    assert added["spec"]["nodeName"] == freed, (added["spec"]["nodeName"], freed)
    assert added["metadata"]["name"] not in {pod["metadata"]["name"] for pod in before}
    rounds = served_by(added)
    assert model_deployment()["status"]["plan"]["replicas"] == 2, model_deployment()["status"]["plan"]
    module_run_changes_nothing(md["spec"]["extraArgs"])
    print(
        f"kubectl apply replicas 1: a pod gone in {down_s:.0f} s, plan Ready {down_ready_s:.0f} s later, routed "
        f"{down_routed_s:.0f} s later; replicas 2: a new pod Ready on {freed} in {up_s:.0f} s, plan Ready "
        f"{up_ready_s:.0f} s later, routed {up_routed_s:.0f} s later, served a chat in round {rounds}"
    )


def test_lab_clean_leaves_no_hosts_volumes_or_link(lab_runs):
    """Last: `make lab-clean` removes every host, their volumes, the pair's link network, the /etc/hosts line and the
    cluster's state (the fixture's own lab-clean after it finds nothing left)."""
    lab_run.make("lab-clean", lab().inventory)

    def podman(*args):
        return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=60, check=False)

    for node in lab().nodes:
        assert podman("container", "exists", node).returncode == 1, node
        for volume in ("containerd", "kubelet"):
            assert podman("volume", "exists", f"tf-{node}-{volume}").returncode == 1, (node, volume)
    if value("tf_lab_link"):
        assert podman("network", "exists", value("tf_lab_link")["name"]).returncode == 1
    with open("/etc/hosts", encoding="utf-8") as hosts:
        assert value("tf_endpoint_hostname") not in hosts.read()
    assert not (lab_root() / value("tf_cluster_name")).exists()
