"""The inventory wins: every serve/tenants/validate setting is a role default (tokenfactory.spark.settings), so an
H100 inventory deploys on H100 with its own context length, limits and prices (against the real API server with a
simulated 8x H100 node; before, serve.yml's play vars put every site on NVIDIA-GB10). validate.yml then loads the
Endpoint's public base URL with the key tenants.yml wrote, and fails loudly when nothing answers there."""

import json
import re
import uuid

import pytest
import yaml
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import DEPLOYMENT, POD
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory import kinds

from tests.modules.lab_helpers import client, self_signed
from tests.playbooks.ansible_run import ROOT, run_playbook

INVENTORY = ROOT / "tests/playbooks/inventories/x86-h100"
SETTINGS = ROOT / "roles/settings"
PLAYBOOKS = ("serve.yml", "tenants.yml", "validate.yml")
# Cluster connection settings: the inventory's cluster.yml (docs/playbooks.md), shared with cluster.yml's roles.
CLUSTER_SETTINGS = {"tf_kubeconfig", "tf_kube_context", "tf_cluster_name"}


def walk(node):
    yield node
    for child in node.values() if isinstance(node, dict) else node if isinstance(node, list) else ():
        yield from walk(child)


def names_set_by_the_playbook(plays):
    """Variables a playbook defines itself: registered results, facts, task and block vars, what it hands on."""
    names = set()
    for node in walk(plays):
        if isinstance(node, dict):
            names.update([node["register"]] if "register" in node else [])
            names.update(node.get("ansible.builtin.set_fact", {}) or {})
            names.update(node.get("vars", {}) if isinstance(node.get("vars"), dict) else {})
            names.update((node.get("ansible.builtin.set_stats") or {}).get("data", {}))
    return names


def test_every_setting_the_playbooks_read_is_a_documented_role_default():
    defaults = yaml.safe_load((SETTINGS / "defaults/main.yml").read_text())
    spec = yaml.safe_load((SETTINGS / "meta/argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    assert set(defaults) == set(spec)
    assert all(option["description"] for option in spec.values())
    for playbook in PLAYBOOKS:
        text = (ROOT / "playbooks" / playbook).read_text()
        plays = yaml.safe_load(text)
        for play in plays:
            if "hosts" in play:
                assert "vars" not in play, f"{playbook}: play vars override the inventory"
                assert {"role": "tokenfactory.spark.settings"} in play.get("roles", []), playbook
        read = set(re.findall(r"(?<![&*\w])(tf_\w+)", text)) - names_set_by_the_playbook(plays) - CLUSTER_SETTINGS
        assert read <= set(defaults), f"{playbook} reads settings without a documented default: {read - set(defaults)}"


def test_a_survey_tenant_is_a_one_item_tenant_list():
    """The AWX surveys' single tenant is the default of tf_gateway_tenants, which tenants.yml reads."""
    default = yaml.safe_load((SETTINGS / "defaults/main.yml").read_text())["tf_gateway_tenants"]
    assert "tf_api_key_tenant" in default and "tf_served_model_name" in default and "tf_api_key_name" in default
    for playbook in ("serve.yml", "validate.yml"):
        text = (ROOT / "playbooks" / playbook).read_text()
        assert not re.search(r"tokenfactory\.spark\.(tenant|api_key):", text), f"{playbook} creates tenants or keys"
        assert "tf_api_key_tenant" not in text, f"{playbook} reads the survey's tenant instead of tf_gateway_tenants"


@pytest.mark.lab
def test_an_h100_inventory_deploys_on_h100(lab_cluster_factory, tmp_path):
    lab = lab_cluster_factory("x86-h100")
    namespace = f"h100-{uuid.uuid4().hex[:6]}"
    cert, key = self_signed("llm.h100.example.com")
    tls = tmp_path / "tls.json"
    tls.write_text(json.dumps({"tf_endpoint_tls_cert": cert, "tf_endpoint_tls_key": key}))
    run_playbook(
        ROOT / "playbooks/serve.yml",
        "-i",
        INVENTORY,
        "-e",
        f"tf_kubeconfig={lab.kubeconfig} tf_namespace={namespace}",
        "-e",
        f"@{tls}",
    )
    kube = client(lab.kubeconfig)
    cluster = kube.get(kinds.COMPUTE_CLUSTER, "h100", namespace)
    assert [gpu["product"] for gpu in cluster["status"]["gpus"]] == ["NVIDIA-H100-80GB-HBM3"], cluster["status"]
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
    assert md["status"]["endpointBaseURL"] == "https://llm.h100.example.com:8443/v1"

    # validate.yml on the Endpoint's public base URL with the key tenants.yml wrote for the survey's tenant. Nothing
    # answers at llm.h100.example.com:8443 here, so it must fail before any load, naming the URL.
    key_file = tmp_path / "keys/acme/qwen2-0-5b-instruct.key"
    validate = [ROOT / "playbooks/validate.yml", "-i", INVENTORY, "-e", f"tf_kubeconfig={lab.kubeconfig}",
                "-e", f"tf_namespace={namespace} tf_api_key_tenant=acme tf_api_key_dir={tmp_path / 'keys'}",
                "-e", "tf_validate_requests=2 tf_validate_concurrency=1 tf_validate_route_timeout=2"]  # fmt: skip
    no_key = run_playbook(*validate, check=False)
    assert no_key.returncode != 0 and f"No API key file {key_file}: run tenants.yml" in no_key.stdout, no_key.stdout
    key_file.parent.mkdir(parents=True)
    key_file.write_text("tfk-h100-inventory-test\n")
    out = run_playbook(*validate, check=False).stdout
    before, fatal = out.split("fatal:", 1) if "fatal:" in out else (out, "")
    assert before.rsplit("TASK [", 1)[-1].startswith("Fail unless the model is listed"), out[-3000:]
    assert "https://llm.h100.example.com:8443/v1/models did not list qwen2-0.5b-instruct" in fatal, fatal[:3000]
    assert "Load the deployment" not in out
    assert "tfk-h100-inventory-test" not in out
