"""The lab's CPU vLLM image runs the engine container exactly as model_deployment renders it - command, arguments,
env, ports, the weights and shared-memory volumes - with only the image switched, and fetches the tiny model from
the stand-in hub (SIMULATION of the public internet, lab/hub.py) through Provider.spec.url = HF_ENDPOINT, as a
production pod fetches from Hugging Face. Run with podman on this machine (the same pod spec runs on the lab's
kubelet in make lab)."""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.deployment import deployment_spec
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines import render
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.inventory import inventory
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.planner import plan_deployment

from lab.engine.install import tiny_model_dir
from lab.processes import free_port
from tests.playbooks.ansible_run import ROOT
from tests.unit.plugins.module_utils.tokenfactory.samples import cluster, gb10, md_params

pytestmark = [pytest.mark.molecule, pytest.mark.slow, pytest.mark.timeout(2400)]
CACHE = pathlib.Path(os.environ.get("TF_CACHE", pathlib.Path.home() / ".cache/tokenfactory"))
IMAGE = "localhost/tokenfactory-vllm-cpu:0.32.0"
REPO = "tokenfactory-lab/tiny-qwen2"
# What the lab inventory sets for the CPU engine (inventories/lab): a user's settings, not special cases.
LAB = {
    "context_length": 512,
    "extra_args": ["--enforce-eager"],
    "env": {"VLLM_CPU_KVCACHE_SPACE": "1"},
    "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
}
TINY = {
    "source": REPO,
    "servedName": "qwen2-0.5b-instruct",
    "architecture": {
        "parametersBillions": "0.0005",
        "numLayers": 2,
        "numKVHeads": 2,
        "headDim": 32,
        "maxContextLength": 2048,
        "dtype": "float32",
    },
}


def podman_gateway():
    networks = json.loads(
        subprocess.run(["podman", "network", "inspect", "podman"], capture_output=True, check=True, text=True).stdout
    )
    return networks[0]["subnets"][0]["gateway"]


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """The stand-in hub on podman's bridge address (containers reach it there), serving the tiny model as REPO."""
    root = tmp_path_factory.mktemp("hub")
    shutil.copytree(tiny_model_dir(), root / REPO)
    address = podman_gateway()
    proc = subprocess.Popen(
        [sys.executable, "-m", "lab.hub", "--root", str(root), "--listen", f"{address}:0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    url = json.loads(proc.stdout.readline())["url"]
    yield url
    proc.terminate()
    proc.wait(10)


def rendered_engine(hub_url):
    """The engine container and pod volumes model_deployment renders for the lab's settings."""
    spec = deployment_spec(md_params(**LAB))
    plan = plan_deployment(spec, TINY, cluster(inventory([gb10("spark-1")])), [], "fail", True, 1, name="qwen")
    md = {
        "apiVersion": "tokenfactory.io/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "qwen", "namespace": "tokenfactory", "uid": "1"},
        "spec": spec,
    }
    provider = {"spec": {"type": "huggingface", "url": hub_url}}
    pod = render(md, TINY, provider, plan)[0]["spec"]["template"]["spec"]
    return pod["containers"][0], pod["volumes"]


def test_the_rendered_engine_container_serves_the_model_from_the_hub(hub):
    archive = next(e for e in json.loads((CACHE / "images/images.json").read_text()) if e["ref"] == IMAGE)["archive"]
    container, volumes = rendered_engine(hub)
    assert container["command"] == ["vllm", "serve"] and container["args"][0] == REPO
    assert {"name": "HF_ENDPOINT", "value": hub} in container["env"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    shm = next(v for v in volumes if v["name"] == "dshm")["emptyDir"]["sizeLimit"]
    port = free_port()
    name = f"tf-images-engine-{uuid.uuid4().hex[:6]}"
    subprocess.run(["podman", "load", "-q", "-i", archive], check=True, timeout=1200)
    run = [
        "podman",
        "run",
        "-d",
        "--name",
        name,
        "-p",
        f"127.0.0.1:{port}:{container['ports'][0]['containerPort']}",
        # The pod's emptyDir volumes: weights (HF_HOME points into it) and shared memory.
        "--mount",
        f"type=tmpfs,destination={mounts['weights']}",
        "--shm-size",
        shm.replace("Gi", "g"),
        *[f"--env={e['name']}={e['value']}" for e in container["env"]],
        "--entrypoint",
        container["command"][0],
        IMAGE,
        *container["command"][1:],
        *container["args"],
    ]
    try:
        subprocess.run(run, check=True, capture_output=True, timeout=120)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}{container['readinessProbe']['httpGet']['path']}", timeout=5
                ) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                time.sleep(3)
        else:
            logs = subprocess.run(["podman", "logs", name], capture_output=True, text=True, check=False).stdout
            pytest.fail(f"engine never became ready:\n{logs[-4000:]}")
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/completions",
            data=json.dumps({"model": "qwen2-0.5b-instruct", "prompt": "hello", "max_tokens": 8}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=120) as answer:  # noqa: S310 - http on loopback
            body = json.loads(answer.read())
        assert body["usage"]["completion_tokens"] == 8
        logs = subprocess.run(["podman", "logs", name], capture_output=True, text=True, check=True)
        assert "unrecognized arguments" not in logs.stdout + logs.stderr
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            assert "vllm:generation_tokens_total" in answer.read().decode()
    finally:
        subprocess.run(["podman", "rm", "-f", name], capture_output=True, check=False)
        subprocess.run(["podman", "rmi", "-f", IMAGE], capture_output=True, check=False)
