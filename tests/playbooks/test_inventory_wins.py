"""The inventory wins: every serve/validate setting is a role default (tokenfactory.spark.settings), so an H100
inventory deploys on H100 with its own context length, limits and prices (against the real API server with a
simulated 8x H100 node; before, serve.yml's play vars put every site on NVIDIA-GB10)."""

import uuid

import pytest
import yaml
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import DEPLOYMENT, POD
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory import kinds

from tests.modules.lab_helpers import client
from tests.playbooks.ansible_run import ROOT, run_playbook

INVENTORY = ROOT / "tests/playbooks/inventories/x86-h100"
SETTINGS = ROOT / "roles/settings"


def test_every_setting_the_playbooks_read_is_a_documented_role_default():
    defaults = yaml.safe_load((SETTINGS / "defaults/main.yml").read_text())
    spec = yaml.safe_load((SETTINGS / "meta/argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    assert set(defaults) == set(spec)
    assert all(option["description"] for option in spec.values())
    for playbook in ("serve.yml", "validate.yml"):
        plays = yaml.safe_load((ROOT / "playbooks" / playbook).read_text())
        for play in plays:
            if "hosts" in play:
                assert "vars" not in play, f"{playbook}: play vars override the inventory"
                assert {"role": "tokenfactory.spark.settings"} in play.get("roles", []), playbook


@pytest.mark.lab
def test_an_h100_inventory_deploys_on_h100(lab_cluster_factory):
    lab = lab_cluster_factory("x86-h100")
    namespace = f"h100-{uuid.uuid4().hex[:6]}"
    run_playbook(
        ROOT / "playbooks/serve.yml",
        "-i",
        INVENTORY,
        "-e",
        f"tf_kubeconfig={lab.kubeconfig} tf_namespace={namespace}",
    )
    kube = client(lab.kubeconfig)
    md = kube.get(kinds.MODEL_DEPLOYMENT, "qwen2-0-5b-instruct", namespace)
    assert md["spec"]["gpuType"] == "NVIDIA-H100-80GB-HBM3"
    assert md["spec"]["gpusPerReplica"] == 2 and md["spec"]["contextLength"] == 16384
    assert md["spec"]["pricing"] == {"currency": "EUR", "inputPer1M": "0.10", "outputPer1M": "0.40"}
    assert md["spec"]["rateLimits"]["perKey"] == {"requestsPerMinute": 120, "tokensPerMinute": 200000}
    assert md["status"]["phase"] == "Ready", md["status"]
    assert md["status"]["placement"]["nodes"] == ["h100-01"]
    endpoint = kube.get(kinds.ENDPOINT, "public", namespace)
    assert endpoint["spec"]["hostname"] == "llm.h100.example.com"
    workload = kube.get(DEPLOYMENT, "qwen2-0-5b-instruct", namespace)
    pod_spec = workload["spec"]["template"]["spec"]
    assert pod_spec["nodeSelector"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert pod_spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert "16384" in pod_spec["containers"][0]["args"]
    (pod,) = kube.list(POD, namespace, "tokenfactory.io/model-deployment=qwen2-0-5b-instruct")
    assert pod["spec"]["nodeName"] == "h100-01"
