"""The ModelDeployment's rendered workload on a real kubelet: one node brought up by the product's cluster.yml
(kubeadm init, bridge pod network, GPU capacity SIMULATION) on a podman host, the lab's CPU vLLM image loaded into
its containerd, and the Token Factory objects registered with the real modules. The engine pod runs the rendered
`vllm serve` arguments, probes, volumes and env unchanged (only the image is the lab's), fetches the tiny model
from the stand-in hub (SIMULATION of the public internet, lab/hub.py) through Provider.spec.url, and answers
through its Service; status.phase follows the pod to Ready, and to Failed on an image that cannot be pulled and
on a crash loop. Podman host: tf-enginepod-<hex> (TF_ENGINEPOD_KEEP=1 keeps it and its volumes for debugging)."""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import time
import types
import uuid

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import DEPLOYMENT, POD, SERVICE
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory import kinds
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines import render
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines.workload import (
    MODEL_DEPLOYMENT_LABEL,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.planner import plan_deployment
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.watch import rollout_now
from tokenfactory_gateway.routing import deployments_from_objects

from lab.engine.install import tiny_model_dir
from tests.modules.fixtures import TokenFactoryLab
from tests.modules.lab_helpers import self_signed
from tests.playbooks.ansible_run import ROOT, run_playbook
from tests.playbooks.lab_node_inventory import write_lab_node_inventory
from lab.versions import kube_tag, pinned

pytestmark = [pytest.mark.molecule, pytest.mark.slow, pytest.mark.timeout(3000)]
CACHE = pathlib.Path(os.environ.get("TF_CACHE", pathlib.Path.home() / ".cache/tokenfactory"))
K8S_IMAGES = CACHE / f"k8s-{kube_tag()}/images/images.json"
ENGINE_IMAGE, ENGINE_VERSION = "localhost/tokenfactory-vllm-cpu", pinned("vllm")
REPO = "tokenfactory-lab/tiny-qwen2"
SERVED = "tiny-qwen2"
GPU = "NVIDIA-GB10"
# The lab's settings for the CPU engine (a user's model_deployment options, not special cases): a short context,
# eager mode, 1 GiB of KV cache, and requests that fit a 2-CPU node whose control plane already asks for most of
# the one allocatable CPU.
LAB_ENGINE = {
    "image": ENGINE_IMAGE,
    "version": ENGINE_VERSION,
    "context_length": 512,
    "extra_args": ["--enforce-eager"],
    "env": {"VLLM_CPU_KVCACHE_SPACE": "1"},
    "resources": {"requests": {"cpu": "100m", "memory": "2Gi"}},
}
READY_TIMEOUT = 900


def podman_gateway():
    networks = json.loads(
        subprocess.run(["podman", "network", "inspect", "podman"], capture_output=True, check=True, text=True).stdout
    )
    return networks[0]["subnets"][0]["gateway"]


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """The stand-in hub on podman's bridge address (the node's pods reach it there), serving the tiny model."""
    root = tmp_path_factory.mktemp("hub")
    shutil.copytree(tiny_model_dir(), root / REPO)
    proc = subprocess.Popen(
        [sys.executable, "-m", "lab.hub", "--root", str(root), "--listen", f"{podman_gateway()}:0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    yield json.loads(proc.stdout.readline())["url"]
    proc.terminate()
    proc.wait(10)


def host_play(tmp_path, tasks_file, hosts, **variables):
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "tasks": [
                {
                    "ansible.builtin.include_tasks": str(ROOT / "molecule/shared/tasks" / tasks_file),
                    "vars": {"tf_podman_hosts": hosts, **variables},
                }
            ],
        }
    ]
    path = tmp_path / f"{tasks_file}.json"
    path.write_text(json.dumps(play))
    return path


def node_images():
    """The lab node's image sets (control plane, node, test) and the CPU vLLM engine image, as OCI archives."""
    node = [e for e in json.loads(K8S_IMAGES.read_text()) if e["set"] in ("control-plane", "node", "test")]
    ref = f"{ENGINE_IMAGE}:{ENGINE_VERSION}"
    engine = next(e for e in json.loads((CACHE / "images/images.json").read_text()) if e["ref"] == ref)
    return [*node, engine]


def write_inventory(directory, name, address, key, kubeconfig):
    groups = {
        "spark_nodes": {"children": {"control_plane": {"hosts": {name: {"ansible_host": address}}}}},
        "k8s_cluster": {"hosts": {name: {}}},
        "tf_lab_nodes": {"hosts": {name: {"containerd_images": node_images()}}},
    }
    # The gateway is not part of this tier: no gateway image is built or loaded.
    write_lab_node_inventory(
        directory,
        groups,
        key,
        ansible_ssh_pipelining=True,
        tf_simulation_repo=str(ROOT),
        kubernetes_kubeconfig_dest=str(kubeconfig),
        gateway_image_source="registry",
    )


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    """A real single-node cluster with the engine image in containerd: (podman name, TokenFactoryLab)."""
    tmp_path = tmp_path_factory.mktemp("enginepod")
    name = f"tf-enginepod-{uuid.uuid4().hex[:6]}"
    hosts = [{"name": name, "image": "localhost/tf-node:bookworm", "kubelet": True}]
    key, kubeconfig = tmp_path / "id_ed25519", tmp_path / "admin.conf"
    create = host_play(
        tmp_path,
        "podman_hosts.yml",
        hosts,
        tf_podman_ssh_key=str(key),
        tf_podman_owner="tf-enginepod-test",
    )
    create_tasks = json.loads(create.read_text())
    create_tasks[0]["tasks"].append(
        {
            "ansible.builtin.copy": {
                "content": "{{ tf_podman_addresses | to_json }}",
                "dest": str(tmp_path / "addresses.json"),
                "mode": "0600",
            }
        }
    )
    create.write_text(json.dumps(create_tasks))
    try:
        run_playbook(create, "-i", "localhost,", "-c", "local", timeout=600)
        address = json.loads((tmp_path / "addresses.json").read_text())[name]
        write_inventory(tmp_path / "inventory", name, address, key, kubeconfig)
        skip = "gpu_operator,gateway,observability,connectx"
        started = time.monotonic()
        run_playbook(
            ROOT / "tests/engine_pod/node.yml", "-i", tmp_path / "inventory", "--skip-tags", skip, timeout=2400
        )
        print(f"node up with the engine image in {time.monotonic() - started:.0f} s")
        lab = TokenFactoryLab(types.SimpleNamespace(kubeconfig=kubeconfig))
        lab.ok("crds")
        yield name, lab
    finally:
        if os.environ.get("TF_ENGINEPOD_KEEP"):  # debugging: keep the node (remove it with podman rm -f NAME)
            print(f"kept {name}; kubeconfig {kubeconfig}")
        else:
            run_playbook(host_play(tmp_path, "podman_hosts_absent.yml", hosts), "-i", "localhost,", "-c", "local",
                         check=False)  # fmt: skip


@pytest.fixture(scope="module")
def served(node, hub):
    """The namespace with a ComputeCluster, the hub's Provider and tiny Model, and an Endpoint (real modules)."""
    lab = node[1]
    namespace = lab.namespace()
    lab.ok("compute_cluster", name="spark", namespace=namespace)
    lab.ok("provider", name="hub", namespace=namespace, type="huggingface", url=hub)
    # No architecture given: the module reads config.json and the safetensors header from the hub.
    lab.ok("model", name="tiny", namespace=namespace, provider="hub", source=REPO, served_name=SERVED)
    cert, key = self_signed("llm.tokenfactory.test")
    lab.ok("endpoint", name="public", namespace=namespace, hostname="llm.tokenfactory.test",
           compute_cluster="spark", tls_cert=cert, tls_key=key)  # fmt: skip
    return namespace


def deploy(lab, namespace, name, model="tiny", **options):
    return lab.run("model_deployment", name=name, namespace=namespace, model=model, endpoint="public", gpu_type=GPU,
                   **{**LAB_ENGINE, **options})  # fmt: skip


def rendered(lab, namespace, name):
    """What the renderer makes of the stored objects (the module's own inputs), independently of what was applied."""
    md = lab.kube.get(kinds.MODEL_DEPLOYMENT, name, namespace)
    model = lab.kube.get(kinds.MODEL, md["spec"]["model"], namespace)
    provider = lab.kube.get(kinds.PROVIDER, model["spec"]["provider"], namespace)
    cluster = lab.kube.get(kinds.COMPUTE_CLUSTER, "spark", namespace)
    plan = plan_deployment(md["spec"], model["spec"], cluster, [], name=name)
    return render(md, model["spec"], provider, plan)


# Lists admission plugins extend: default not-ready/unreachable tolerations, the service account token volume.
ADMISSION_APPENDS = (".tolerations", ".volumes", ".volumeMounts")


def contained(expected, actual, where="pod"):
    """Every field the renderer set is in the live object with the same value (the API server only adds)."""
    if where.endswith(ADMISSION_APPENDS):  # the rendered items first, then what admission added
        assert isinstance(actual, list) and len(actual) >= len(expected), f"{where}: {actual!r} != {expected!r}"
        contained(expected, actual[: len(expected)], f"{where}[:{len(expected)}]")
    elif isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where}: {actual!r} is not a mapping"
        for field, value in expected.items():
            if field not in actual:  # the API server leaves out zero values (omitempty)
                assert value in (0, "", False, None, [], {}), f"{where}.{field} missing in the running object"
                continue
            contained(value, actual[field], f"{where}.{field}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), f"{where}: {actual!r} != {expected!r}"
        for index, (want, have) in enumerate(zip(expected, actual, strict=True)):
            contained(want, have, f"{where}[{index}]")
    else:
        assert actual == expected or str(actual) == str(expected), f"{where}: {actual!r} != {expected!r}"


def watch_phases(lab, namespace, name, until, timeout):
    """Phases rollout_now (the module's observe) reports, one per change, until one of `until` or the timeout."""
    phases, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = lab.kube.get(kinds.MODEL_DEPLOYMENT, name, namespace)
        now = rollout_now(lab.kube, md)
        if not phases or phases[-1][0] != now["phase"]:
            phases.append((now["phase"], now["message"]))
            print(f"{name}: {now['progressLine']}")
        if now["phase"] in until:
            return phases
        time.sleep(3)
    pytest.fail(f"{name} never reached {until}: {phases}")


def engine_pods(lab, namespace, name):
    return lab.kube.list(POD, namespace, f"{MODEL_DEPLOYMENT_LABEL}={name}")


def pod_ready(pod):
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))


def routed(lab, namespace):
    objects = lab.kube.list(kinds.MODEL, namespace) + lab.kube.list(kinds.MODEL_DEPLOYMENT, namespace)
    return [d.name for d in deployments_from_objects(objects)]


def node_http(node_name, url, body=None):
    """An HTTP request from inside the node (its network namespace: kube-proxy's Service rules apply)."""
    code = (
        "import json, sys, urllib.request as u; data = sys.argv[2].encode() if sys.argv[2] else None; "
        "r = u.Request(sys.argv[1], data=data, headers={'Content-Type': 'application/json'}); "
        "print(u.urlopen(r, timeout=120).read().decode())"
    )
    run = ["podman", "exec", node_name, "python3", "-c", code, url, json.dumps(body) if body else ""]
    return subprocess.run(run, capture_output=True, text=True, check=True, timeout=180).stdout


def remove(lab, namespace, name):
    lab.ok("model_deployment", name=name, namespace=namespace, state="absent", wait=True)
    deadline = time.monotonic() + 120
    while engine_pods(lab, namespace, name) and time.monotonic() < deadline:
        time.sleep(2)


@pytest.fixture
def cleanup(node, served):
    """Deletes the ModelDeployments a test created (each claims the node's one GPU) once it ends, passed or not."""
    lab = node[1]
    yield
    for md in lab.kube.list(kinds.MODEL_DEPLOYMENT, served):
        remove(lab, served, md["metadata"]["name"])


def test_the_rendered_engine_runs_and_its_status_follows_the_pod(node, served, cleanup):
    node_name, lab = node
    namespace, name = served, "tiny"
    applied = deploy(lab, namespace, name, wait=False)
    assert not applied.get("failed"), applied.get("msg")
    assert applied["status"]["phase"] in ("Pending", "Progressing"), applied["status"]
    assert routed(lab, namespace) == [], "a deployment that is not Ready gets no traffic"

    phases = watch_phases(lab, namespace, name, ("Ready", "Failed"), READY_TIMEOUT)
    assert phases[-1][0] == "Ready", phases
    assert {seen[0] for seen in phases[:-1]} <= {"Pending", "Progressing"}, phases
    (pod,) = engine_pods(lab, namespace, name)
    assert pod_ready(pod), "Ready follows the pod's readiness probe"

    # The pod runs what the renderer makes of the stored objects: arguments, probes, volumes, env, ports, resources.
    deployment, service = rendered(lab, namespace, name)
    want = deployment["spec"]["template"]["spec"]
    assert want["containers"][0]["image"] == f"{ENGINE_IMAGE}:{ENGINE_VERSION}"
    assert want["containers"][0]["args"][0] == REPO
    contained(want, pod["spec"])
    contained(deployment["spec"], lab.kube.get(DEPLOYMENT, name, namespace)["spec"], "deployment.spec")
    live_service = lab.kube.get(SERVICE, name, namespace)
    contained(service["spec"], live_service["spec"], "service.spec")
    logs = lab.kube.log(pod["metadata"]["name"], namespace, "engine")
    assert "unrecognized arguments" not in logs and "error: argument" not in logs

    # The engine answers through its Service, from inside the node.
    base = f"http://{live_service['spec']['clusterIP']}:{live_service['spec']['ports'][0]['port']}"
    answer = json.loads(node_http(node_name, f"{base}/v1/completions",
                                  {"model": SERVED, "prompt": "hello", "max_tokens": 8}))  # fmt: skip
    assert answer["model"] == SERVED and answer["usage"]["completion_tokens"] == 8
    assert "vllm:generation_tokens_total" in node_http(node_name, f"{base}/metrics")

    # The module records Ready (what the gateway routes on) and the upstream the gateway calls.
    ready = deploy(lab, namespace, name, wait=True, wait_timeout=120)
    assert not ready.get("failed"), ready.get("msg")
    assert ready["status"]["phase"] == "Ready" and ready["status"]["readyReplicas"] == 1, ready["status"]
    assert ready["upstream_url"] == f"http://{name}.{namespace}.svc:8000"
    assert routed(lab, namespace) == [f"{namespace}/{name}"]


def test_an_image_that_cannot_be_pulled_fails_the_deployment(node, served, cleanup):
    lab = node[1]
    namespace, name = served, "no-image"
    result = deploy(lab, namespace, name, version="0.0.0-absent", wait=True, wait_timeout=300)
    assert result.get("failed"), result
    md = lab.kube.get(kinds.MODEL_DEPLOYMENT, name, namespace)
    assert md["status"]["phase"] == "Failed", md["status"]
    assert any(reason in md["status"]["message"] for reason in ("ErrImagePull", "ImagePullBackOff")), md["status"]
    assert f"{ENGINE_IMAGE}:0.0.0-absent" in md["status"]["message"], md["status"]
    assert name in result["msg"]
    assert routed(lab, namespace) == []


def test_a_crash_looping_engine_fails_the_deployment(node, served, cleanup):
    lab = node[1]
    namespace, name = served, "crashing"
    # A Model whose repository the hub does not have (a typo in the source): the engine exits at start, again and
    # again. The architecture is given, so the module does not read the hub itself.
    architecture = {"parameters_billions": "0.0005", "num_layers": 2, "num_kv_heads": 2, "head_dim": 32,
                    "max_context_length": 2048, "dtype": "float32"}  # fmt: skip
    lab.ok("model", name="typo", namespace=namespace, provider="hub", source="tokenfactory-lab/tiny-qwen2-typo",
           served_name="typo", architecture=architecture)  # fmt: skip
    result = deploy(lab, namespace, name, model="typo", wait=True, wait_timeout=600)
    assert result.get("failed"), result
    md = lab.kube.get(kinds.MODEL_DEPLOYMENT, name, namespace)
    assert md["status"]["phase"] == "Failed", md["status"]
    message = md["status"]["message"]
    assert "CrashLoopBackOff" in message and "last exit code" in message and "last log lines" in message, message
    assert routed(lab, namespace) == []
