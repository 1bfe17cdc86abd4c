"""serve.yml and the GPU readiness wait show their state as they go, against the lab's real API server (scheduler,
deployment controller, kwok): one progress line per look with the phase, ready replicas and why, and a failure
naming the pod's reason.

The node is cordoned first so the rollout stays Pending (the scheduler's own message) for two looks. Then either
the node is uncordoned (kwok runs the pod: Ready), or the pod's status is set the way a kubelet reports an image
pull failure or an OOM-killed crash loop before it is scheduled; kwok leaves a pod that has an IP alone."""

import pathlib
import json
import re
import subprocess
import threading
import uuid

import pytest
from lab.wait import wait_until
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import NODE, POD, KubeClient
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory import kinds

from tests.playbooks.ansible_run import BIN, ROOT, ansible_env, run_playbook

pytestmark = pytest.mark.lab

NODE_NAME = "spark-01"
DEPLOYMENT = "qwen2-0-5b-instruct"
MERGE = "application/merge-patch+json"
LOOK = (
    r"\[localhost\] (?P<mark>waiting|done) (?P<look>\d+)(?:/\d+)?, \d+s: "
    rf"ModelDeployment (?P<ns>[\w-]+)/{DEPLOYMENT}: (?P<phase>\w+), (?P<ready>\d)/1 ready(?P<rest>.*)"
)
IMAGE_PULL = {
    "waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "nvcr.io/nvidia/vllm:no-such-tag"'}
}
OOM = {
    "waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s restarting failed container"},
    "last": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}},
}


def kube(tf_lab):
    return KubeClient({"kubeconfig": str(tf_lab.kubeconfig)}, field_manager="progress-test")


def cordon(client, unschedulable):
    client.request("PATCH", NODE.path(None, NODE_NAME), {"spec": {"unschedulable": unschedulable or None}}, None, MERGE)


def start_serve(tf_lab, namespace):
    extra = (
        f"tf_kubeconfig={tf_lab.kubeconfig} tf_namespace={namespace} tf_cluster_name=spark "
        "tf_serve_wait_timeout=90 tf_serve_wait_delay=1 "
        # The site CA (TLS as shipped) in the lab cluster's own directory, not the user's HOME.
        f"tf_site_ca_dir={pathlib.Path(tf_lab.kubeconfig).parent / ('site-ca-' + namespace)}"
    )
    cmd = [BIN / "ansible-playbook", ROOT / "playbooks/serve.yml", "-i", ROOT / "inventories/spark-single", "-e", extra]
    return subprocess.Popen(
        list(map(str, cmd)), cwd=ROOT, env=ansible_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def unschedulable_pod(client, namespace):
    """The engine pod once the scheduler has said it cannot place it."""

    def probe():
        for pod in client.list(POD, namespace):
            conditions = (pod.get("status") or {}).get("conditions") or []
            if any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions):
                return pod
        return None

    return wait_until(probe, 120, "the scheduler to report the pod unschedulable", interval=0.3)


def report_stuck(client, pod, state):
    """Set the pod's status as a kubelet reports a container it cannot start (with an IP: kwok leaves it alone)."""
    container = pod["spec"]["containers"][0]
    status = {
        "name": container["name"],
        "image": container["image"],
        "imageID": "",
        "ready": False,
        "started": False,
        "restartCount": 4 if "last" in state else 0,
        "state": {"waiting": state["waiting"]},
    }
    if "last" in state:
        status["lastState"] = state["last"]
    body = {"status": {"podIP": "10.244.9.9", "podIPs": [{"ip": "10.244.9.9"}], "containerStatuses": [status]}}
    meta = pod["metadata"]
    client.request("PATCH", POD.path(meta["namespace"], meta["name"], "status"), body, None, MERGE)


def looks(output, namespace):
    found = [m.groupdict() for m in re.finditer(LOOK, output)]
    assert found and all(m["ns"] == namespace for m in found), output[-5000:]
    return found


def serve_with(tf_lab, then, inspect):
    """Run serve.yml with the node cordoned until it has printed two Pending looks, then `then(client, pod)`, and
    once it ended inspect(namespace) before the deployment is removed; returns (return code, output, namespace)."""
    client, namespace = kube(tf_lab), f"watch-{uuid.uuid4().hex[:6]}"
    cordon(client, True)
    proc = start_serve(tf_lab, namespace)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        pod = unschedulable_pod(client, namespace)
        wait_until(lambda: sum("waiting" in line and ": Pending, " in line for line in lines) >= 2, 120, "2 looks")
        then(client, pod)
        proc.wait(timeout=240)
        reader.join(timeout=30)
        inspect(namespace)
    finally:
        cordon(client, False)
        if proc.poll() is None:
            proc.kill()
        if tf_lab.kube.get(kinds.MODEL_DEPLOYMENT, DEPLOYMENT, namespace):
            tf_lab.ok("model_deployment", name=DEPLOYMENT, namespace=namespace, state="absent")
    return proc.returncode, "".join(lines), namespace


def gateway_style_rollout(tf_lab, namespace):
    """rollout_info (what the gateway role polls) on the engine's Deployment."""
    return tf_lab.ok("rollout_info", name=DEPLOYMENT, namespace=namespace)


def test_rollout_progress_is_printed_until_ready(tf_lab):
    seen_by_rollout_info = []
    code, output, namespace = serve_with(
        tf_lab,
        lambda client, pod: cordon(client, False),
        lambda ns: seen_by_rollout_info.append(gateway_style_rollout(tf_lab, ns)),
    )
    assert code == 0, output[-5000:]
    seen = looks(output, namespace)
    pending = [m for m in seen if m["mark"] == "waiting" and m["phase"] == "Pending"]
    assert len(pending) >= 2, output[-5000:]
    assert "node(s) were unschedulable" in pending[0]["rest"], pending[0]
    assert [int(m["look"]) for m in seen] == list(range(1, len(seen) + 1))
    assert (seen[-1]["mark"], seen[-1]["phase"], seen[-1]["ready"]) == ("done", "Ready", "1")
    assert "is Ready on spark-01" in output
    rollout = seen_by_rollout_info[0]
    assert rollout["rollout"]["phase"] == "Ready" and rollout["rollout"]["readyReplicas"] == 1
    assert rollout["progress_line"].startswith(f"Deployment {namespace}/{DEPLOYMENT}: Ready, 1/1 ready")


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        (IMAGE_PULL, 'ImagePullBackOff; Back-off pulling image "nvcr.io/nvidia/vllm:no-such-tag"'),
        (OOM, "CrashLoopBackOff; back-off 40s restarting failed container; last exit code 137 (OOMKilled), restarts 4"),
    ],
    ids=["image-pull", "oom-crash-loop"],
)
def test_a_stuck_pod_ends_the_wait_with_its_reason(tf_lab, state, reason):
    seen_by_rollout_info = []
    code, output, namespace = serve_with(
        tf_lab,
        lambda client, pod: report_stuck(client, pod, state),
        lambda ns: seen_by_rollout_info.append(gateway_style_rollout(tf_lab, ns)),
    )
    assert code != 0, output[-5000:]
    seen = looks(output, namespace)
    assert [m["phase"] for m in seen[:2]] == ["Pending", "Pending"], output[-5000:]
    assert (seen[-1]["mark"], seen[-1]["phase"]) == ("done", "Failed"), output[-5000:]
    assert f"container engine {reason}" in seen[-1]["rest"], seen[-1]
    # The task that records the phase fails with the pod's reason (and, after a crash, the last log lines).
    flat = " ".join(output.split())
    assert f"ModelDeployment {namespace}/{DEPLOYMENT} failed: {DEPLOYMENT}-" in flat, output[-5000:]
    assert f"container engine {reason}" in flat
    if state is OOM:
        assert "last log lines:" in flat
    assert "TASK [Model deployment is Ready]" in output
    rollout = seen_by_rollout_info[0]
    assert rollout["rollout"]["phase"] == "Failed"
    assert f"container engine {reason}" in rollout["progress_line"]


def test_gpu_readiness_names_what_is_missing(tf_lab):
    ready = tf_lab.ok("gpu_readiness_info", labels=["nvidia.com/gpu.product"])
    assert ready["ready"] and ready["gaps"] == {}
    assert ready["progress_line"] == "GPU nodes: Ready, 1/1 ready"
    assert ready["gpus"] == [{"name": NODE_NAME, "count": 1, "product": "NVIDIA-GB10"}]
    missing = tf_lab.ok(
        "gpu_readiness_info", nodes=[NODE_NAME, "spark-99"], labels=["nvidia.com/gpu.product", "example.com/absent"]
    )
    assert not missing["ready"]
    assert missing["gaps"] == {NODE_NAME: ["label example.com/absent missing"], "spark-99": ["node not found"]}
    assert missing["progress_line"] == (
        "GPU nodes: Pending, 0/2 ready - spark-01: label example.com/absent missing; spark-99: node not found"
    )


def gpu_wait(tf_lab, tmp_path, extra_labels):
    """The gpu_operator role's wait (install off, as in the lab) through ansible-playbook."""
    book = tmp_path / "gpu_wait.yml"
    role_vars = {
        "gpu_operator_install": False,
        "gpu_operator_kubeconfig": str(tf_lab.kubeconfig),
        "gpu_operator_wait_timeout": 3,
        "gpu_operator_wait_delay": 1,
        "gpu_operator_required_labels": ["nvidia.com/gpu.product", *extra_labels],
    }
    task = {"ansible.builtin.include_role": {"name": "tokenfactory.spark.gpu_operator", "tasks_from": "wait"}}
    book.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [{**task, "vars": role_vars}]}]))
    return run_playbook(book, "-i", "localhost,", "-c", "local", check=False)


def test_gpu_readiness_wait_prints_each_look_and_fails_with_the_gap(tf_lab, tmp_path):
    ready = gpu_wait(tf_lab, tmp_path, [])
    assert ready.returncode == 0, ready.stdout[-4000:]
    assert re.search(r"\[localhost\] done 1, \d+s: GPU nodes: Ready, 1/1 ready", ready.stdout), ready.stdout[-4000:]
    assert "spark-01: 1 x NVIDIA-GB10" in ready.stdout

    missing = gpu_wait(tf_lab, tmp_path, ["example.com/absent"])
    assert missing.returncode != 0
    gap = "GPU nodes: Pending, 0/1 ready - spark-01: label example.com/absent missing"
    assert len(re.findall(rf"\[localhost\] waiting \d+/\d+, \d+s: {gap}", missing.stdout)) >= 2, missing.stdout[-4000:]
    assert f"GPU nodes not ready after 3 s: {gap}" in " ".join(missing.stdout.split())
