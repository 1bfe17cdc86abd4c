"""GPU faults through the whole pipeline, real except the GPU: the simulated DCGM exporter serves a GB10's text,
the real node-exporter this machine's memory, a real Prometheus evaluates the shipped rules, and
playbooks/health_gate.yml (module cluster_health_info) reads the lab API server's GB10 node and the alerts.
The GPU's state changes by rewriting the exporter's file: healthy, thermal throttling, lost, healthy, XID 79."""

import json

import pytest
import yaml

from lab.paths import REPO_ROOT
from lab.processes import free_port
from tests.observability.fixtures import render
from tests.observability.prometheus import Prometheus, node_exporter, set_gpu_state, simulated_dcgm_exporter
from tests.playbooks.ansible_run import run_playbook

pytestmark = [pytest.mark.observability, pytest.mark.lab]
# The shipped rules with their `for` durations shortened to what a test can wait for.
FAST = {"gpu_lost_for": "0s", "throttling_for": "2s", "exporter_down_for": "5s", "memory_pressure_for": "5s"}


@pytest.fixture(scope="module")
def pipeline(lab_cluster, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pipeline")
    dcgm, dcgm_port, served = simulated_dcgm_exporter(tmp, "gb10-healthy")
    node, node_port = node_exporter(tmp)
    thresholds = yaml.safe_load((REPO_ROOT / "roles/observability/defaults/main.yml").read_text())
    rendered = render(
        tmp,
        {
            "observability_scrape_interval": "1s",
            "observability_kubernetes_sd_kubeconfig": str(lab_cluster.kubeconfig),
            "observability_rule_files_dir": str(tmp / "prom" / "rules"),
            "observability_alert_thresholds": {**thresholds["observability_alert_thresholds"], **FAST},
            "observability_static_engine_targets": [],
            "observability_static_dcgm_targets": [{"node": "spark-01", "targets": [f"127.0.0.1:{dcgm_port}"]}],
            "observability_static_node_targets": [
                {"node": "spark-01", "gpu_product": "NVIDIA-GB10", "targets": [f"127.0.0.1:{node_port}"]}
            ],
        },
    )
    prom = Prometheus(tmp / "prom", rendered.config_text, rendered.rules_text).start()
    prom.until(
        "GPU and host metrics", lambda: prom.query("DCGM_FI_DEV_GPU_TEMP") and prom.query("node_memory_MemTotal_bytes")
    )
    yield {"prom": prom, "served": served, "kubeconfig": lab_cluster.kubeconfig, "tmp": tmp}
    prom.stop()
    dcgm.stop()
    node.stop()


def set_gpu(pipeline, case):
    set_gpu_state(pipeline["served"], case)


def firing(prom, alertname):
    return [a for a in prom.alerts() if a["labels"]["alertname"] == alertname and a["state"] == "firing"]


def gate(pipeline, **extra):
    extra_vars = pipeline["tmp"] / "gate-vars.json"
    extra_vars.write_text(
        json.dumps(
            {"tf_kubeconfig": str(pipeline["kubeconfig"]), "tf_health_prometheus_url": pipeline["prom"].url, **extra}
        )
    )
    proc = run_playbook(
        REPO_ROOT / "playbooks/health_gate.yml",
        "-i",
        REPO_ROOT / "inventories/lab/hosts.yml",
        "-e",
        f"@{extra_vars}",
        check=False,
        extra_env={"ANSIBLE_NOCOLOR": "1"},
    )
    return proc.returncode, " ".join(proc.stdout.split())


def test_gate_follows_the_gpu(pipeline):
    prom = pipeline["prom"]
    rc, out = gate(pipeline)
    assert rc == 0 and "Health gate open." in out and "1 GPU node(s) (spark-01), 0 alert(s) firing" in out, out

    set_gpu(pipeline, "gb10-thermal-throttle")
    prom.until("thermal throttling alert", lambda: firing(prom, "TokenFactoryGPUThermalThrottling"))
    rc, out = gate(pipeline)
    assert rc == 0 and "Health gate open." in out, out  # a warning: printed, not blocking
    assert "spark-01: TokenFactoryGPUThermalThrottling (warning)" in out, out
    rc, out = gate(pipeline, tf_health_blocking_severities=["critical", "warning"])
    assert rc != 0 and "Health gate closed: spark-01: TokenFactoryGPUThermalThrottling (warning)" in out, out

    set_gpu(pipeline, "gb10-gpu-lost")
    prom.until("GPU lost alert", lambda: firing(prom, "TokenFactoryGPULost"))
    rc, out = gate(pipeline)
    assert rc != 0, out
    assert "spark-01: DCGM reports 0 of 1 GPUs" in out and "TokenFactoryGPULost (critical)" in out, out

    set_gpu(pipeline, "gb10-healthy")
    prom.until("the alerts to resolve", lambda: not firing(prom, "TokenFactoryGPULost") and not firing(
        prom, "TokenFactoryGPUThermalThrottling"), timeout=30)  # fmt: skip
    rc, out = gate(pipeline)
    assert rc == 0 and "Health gate open." in out, out

    set_gpu(pipeline, "gb10-xid-79")
    prom.until("critical XID alert", lambda: firing(prom, "TokenFactoryGPUXidCritical"))
    rc, out = gate(pipeline)
    assert rc != 0 and "TokenFactoryGPUXidCritical (critical): GPU 0 on spark-01: XID 79 needs the node drained" in out
    rc, out = gate(pipeline, tf_health_ignore_alerts=["TokenFactoryGPUXidCritical"])
    assert rc == 0, out


def test_gate_names_a_node_that_is_not_a_gpu_node(pipeline):
    set_gpu(pipeline, "gb10-healthy")
    rc, out = gate(pipeline, tf_health_nodes=["spark-09"], tf_health_ignore_alerts=["TokenFactoryGPUXidCritical"])
    assert rc != 0 and "spark-09: no such GPU node" in out, out


def test_gate_fails_loudly_when_prometheus_does_not_answer(pipeline):
    rc, out = gate(pipeline, tf_health_prometheus_url=f"http://127.0.0.1:{free_port()}")
    assert rc != 0 and "prometheus_url: cannot read Prometheus at http://127.0.0.1:" in out, out
