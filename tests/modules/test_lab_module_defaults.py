"""The README's module_defaults example, run as written: every module of both action groups gets its connection
from it alone (real API server of the lab, real gateway with PostgreSQL and Redis)."""

import json
import pathlib
import re
import uuid

import pytest
import yaml

from tests.modules.lab_helpers import self_signed
from tests.observability.prometheus import Prometheus
from tests.playbooks.ansible_run import ROOT, run_playbook

pytestmark = [pytest.mark.lab, pytest.mark.gateway]


def readme_play():
    """The YAML block of the README that sets module_defaults for the action groups."""
    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    (block,) = [b for b in blocks if "group/tokenfactory.spark." in b]
    (play,) = yaml.safe_load(block)
    return play


@pytest.fixture
def prometheus(tmp_path):
    """A real, empty Prometheus for cluster_health_info (no scrape targets, no alerts)."""
    prom = Prometheus(tmp_path / "prometheus", "global: {scrape_interval: 1s}\n").start()
    yield prom
    prom.stop()


def test_readme_module_defaults_reach_every_module_of_both_groups(tf_lab, gateway_factory, prometheus, tmp_path):
    gateway = gateway_factory([])
    namespace = "tokenfactory"
    tf_lab.kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    suffix = uuid.uuid4().hex[:6]
    cert, key = self_signed("llm.example.com")
    modules = {
        "crds": {},
        "compute_cluster": {"name": f"spark-{suffix}"},
        "compute_cluster_info": {"name": f"spark-{suffix}"},
        "provider": {"name": f"hf-{suffix}", "type": "huggingface"},
        "provider_info": {"name": f"hf-{suffix}"},
        "model": {"name": f"qwen-{suffix}", "provider": f"hf-{suffix}", "source": "Qwen/Qwen2-0.5B-Instruct"},
        "model_info": {"name": f"qwen-{suffix}"},
        "endpoint": {
            "name": f"public-{suffix}",
            "hostname": "llm.example.com",
            "compute_cluster": f"spark-{suffix}",
            "tls_cert": cert,
            "tls_key": key,
        },
        "endpoint_info": {"name": f"public-{suffix}"},
        "model_deployment": {
            "name": f"qwen-{suffix}",
            "model": f"qwen-{suffix}",
            "endpoint": f"public-{suffix}",
            "gpu_type": "NVIDIA-GB10",
            "context_length": 4096,
            "tenants": ["acme"],
        },
        "model_deployment_info": {"name": f"qwen-{suffix}"},
        "rollout_info": {"name": f"qwen-{suffix}"},
        "cluster_health_info": {"prometheus_url": prometheus.url, "require_gpu_metrics": False},
        "tenant": {"name": "acme"},
        "api_key": {"tenant": "acme", "name": "readme", "key_file": str(tmp_path / "key")},
        "usage_info": {"tenant": "acme"},
    }
    groups = yaml.safe_load((ROOT / "meta/runtime.yml").read_text())["action_groups"]
    assert set(modules) == {m for members in groups.values() for m in members}, "the test covers every module"

    play = readme_play()
    assert set(play["module_defaults"]) == {f"group/tokenfactory.spark.{g}" for g in groups}
    tasks = [{"name": name, f"tokenfactory.spark.{name}": args, "register": name} for name, args in modules.items()]
    results = tmp_path / "results.json"
    summary = "{{ {" + ", ".join(f"'{name}': {name}" for name in modules) + "} | to_json }}"
    tasks.append({"name": "results", "ansible.builtin.copy": {"content": summary, "dest": str(results)}})
    book = tmp_path / "readme.yml"
    book.write_text(yaml.safe_dump([{**play, "hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    extra_vars = {
        "tf_kubeconfig": str(tf_lab.kubeconfig),
        "tf_gateway_url": gateway.admin_url,  # the admin API is on the internal listener
        "vault_gateway_admin_token": gateway.admin_token,
    }
    try:
        run_playbook(book, "-i", "localhost,", "-c", "local", "-e", json.dumps(extra_vars))
    finally:
        tf_lab.ok("model_deployment", name=f"qwen-{suffix}", namespace=namespace, state="absent")  # frees the GPU

    outcome = json.loads(results.read_text())
    assert all(not outcome[name].get("failed") for name in modules), outcome
    assert outcome["model_deployment"]["status"]["phase"] == "Ready"
    assert [m["metadata"]["name"] for m in outcome["model_info"]["models"]] == [f"qwen-{suffix}"]
    assert outcome["rollout_info"]["rollout"]["phase"] in {"Pending", "Progressing", "Ready"}
    assert outcome["tenant"]["tenant"]["name"] == "acme"
    assert outcome["api_key"]["api_key"]["tenant"] == "acme" and pathlib.Path(tmp_path / "key").stat().st_size > 0
    assert outcome["usage_info"]["usage"] == []
