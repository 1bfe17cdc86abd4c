"""playbooks/serve.yml through ansible-playbook against the lab (real API server, simulated GB10 node):
check mode first, then the real run, then a no-change rerun."""

import re
import uuid

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory import kinds

from tests.modules.lab_helpers import snapshot
from tests.playbooks.ansible_run import ROOT, play_recap, run_playbook

pytestmark = pytest.mark.lab


def recap(stdout):
    return play_recap(stdout)["localhost"]


def test_serve_playbook_creates_the_walkthrough_objects(tf_lab, tmp_path):
    namespace = f"serve-{uuid.uuid4().hex[:6]}"
    extra = [
        "-i",
        ROOT / "inventories/spark-single",
        "-e",
        f"tf_kubeconfig={tf_lab.kubeconfig} tf_namespace={namespace} tf_cluster_name=spark tf_serve_wait_timeout=120",
        "-e",
        f"tf_site_ca_dir={tmp_path / 'site-ca'}",
    ]
    first = run_playbook(ROOT / "playbooks/serve.yml", *extra)
    assert recap(first.stdout)["changed"] >= 6
    # As shipped: TLS from the site CA the run created (and names), on the first Spark's address.
    said = " ".join(first.stdout.split())
    assert (
        "qwen2-0.5b-instruct is Ready on spark-01; OPENAI_BASE_URL=https://192.0.2.11/v1; clients trust the site CA "
        f"{tmp_path / 'site-ca/ca.crt'}"
    ) in said, first.stdout[-4000:]
    made = sorted(p.name for p in (tmp_path / "site-ca").iterdir())
    assert made == ["ca.crt", "ca.key", "endpoint.crt", "endpoint.key"], made
    deployment = tf_lab.kube.get(kinds.MODEL_DEPLOYMENT, "qwen2-0-5b-instruct", namespace)
    assert deployment["status"]["phase"] == "Ready"
    assert deployment["status"]["servedModelName"] == "qwen2-0.5b-instruct"
    assert deployment["spec"]["pricing"] == {"currency": "USD", "inputPer1M": "0.15", "outputPer1M": "0.60"}
    model = tf_lab.kube.get(kinds.MODEL, "qwen2-0-5b-instruct", namespace)
    assert model["spec"]["source"] == "Qwen/Qwen2-0.5B-Instruct"

    second = run_playbook(ROOT / "playbooks/serve.yml", *extra)
    assert recap(second.stdout)["changed"] == 0, second.stdout[-4000:]

    # Check mode (server-side dry run) of a change: reported, diffed, not written.
    before = snapshot(tf_lab.kube, namespace)
    planned = run_playbook(ROOT / "playbooks/serve.yml", *extra, "-e", "tf_context_length=4096", "--check", "--diff")
    assert recap(planned.stdout)["changed"] == 1
    assert re.search(r"-\s+- '8192'\s*\n\+\s+- '4096'", planned.stdout), planned.stdout[-4000:]
    assert snapshot(tf_lab.kube, namespace) == before
    tf_lab.ok("model_deployment", name="qwen2-0-5b-instruct", namespace=namespace, state="absent")
