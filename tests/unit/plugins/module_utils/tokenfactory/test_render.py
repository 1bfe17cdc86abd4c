"""Renderers: vLLM Deployment/StatefulSet/Service/HPA/PDB, NIMService, DynamoGraphDeployment."""

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.checks import ValidationError
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.deployment import deployment_spec
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines import render, upstream_url
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.inventory import inventory
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.planner import plan_deployment

from tests.unit.plugins.module_utils.tokenfactory.samples import QWEN_05B, cluster, gb10, md_params

PROVIDER = {"spec": {"type": "huggingface", "credentialsSecret": {"name": "hf-credentials", "key": "token"}}}
SINGLE = cluster(inventory([gb10("spark-1")]))
PAIR = cluster(inventory([gb10("spark-1", "pair-a"), gb10("spark-2", "pair-a")]))


def md(**overrides):
    return {
        "apiVersion": "tokenfactory.io/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "qwen", "namespace": "tf", "uid": "1234"},
        "spec": deployment_spec(md_params(**{"context_length": 8192, **overrides})),
    }


def planned(obj, compute_cluster=SINGLE, model=QWEN_05B):
    return plan_deployment(obj["spec"], model, compute_cluster, [], name=obj["metadata"]["name"])


def rendered(obj, model=QWEN_05B, credentials=True, compute_cluster=SINGLE):
    """The children of obj for a Hugging Face provider (with its token Secret unless credentials=False)."""
    return render(obj, model, PROVIDER if credentials else None, planned(obj, compute_cluster, model))


def by_kind(objects):
    return {o["kind"]: o for o in objects}


def test_vllm_deployment_has_engine_essentials():
    children = rendered(md())
    assert [c["kind"] for c in children] == ["Deployment", "Service"]
    deployment = children[0]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    assert container["command"] == ["vllm", "serve"]
    assert args[0] == "Qwen/Qwen2-0.5B-Instruct"
    pairs = dict(zip(args[1::2], args[2::2], strict=False))
    assert pairs["--served-model-name"] == "Qwen/Qwen2-0.5B-Instruct"
    assert pairs["--max-model-len"] == "8192"
    assert pairs["--gpu-memory-utilization"] == "0.75"
    assert "--enable-prefix-caching" in args
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert container["resources"]["requests"]["nvidia.com/gpu"] == "1"
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] == "/health"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["dshm"]["emptyDir"]["medium"] == "Memory"
    assert volumes["weights"]["hostPath"] == {"path": "/var/lib/tokenfactory/models", "type": "DirectoryOrCreate"}
    env = {e["name"]: e for e in container["env"]}
    assert env["HF_HOME"]["value"] == "/models/huggingface"
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "hf-credentials", "key": "token"}
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-GB10", "kubernetes.io/arch": "arm64"}
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert deployment["spec"]["replicas"] == 1
    owner = deployment["metadata"]["ownerReferences"][0]
    assert owner == {
        "apiVersion": "tokenfactory.io/v1alpha1",
        "kind": "ModelDeployment",
        "name": "qwen",
        "uid": "1234",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def engine_pod(obj):
    workload = rendered(obj, compute_cluster=PAIR if obj["spec"]["gpusPerReplica"] > 1 else SINGLE)[-2]
    pod = workload["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    return env, mounts["weights"], {v["name"]: v for v in pod["volumes"]}["weights"]


@pytest.mark.parametrize("gpus", [1, 2])  # a Deployment, and the StatefulSet of ranks of a Spark pair
def test_weights_and_compile_caches_live_on_the_nodes_directory_shared_by_its_replicas(gpus):
    env, mount, volume = engine_pod(md(gpus_per_replica=gpus))
    assert volume == {
        "name": "weights",
        "hostPath": {"path": "/var/lib/tokenfactory/models", "type": "DirectoryOrCreate"},
    }
    assert {
        name: env[name] for name in ("HF_HOME", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "VLLM_CACHE_ROOT")
    } == {
        "HF_HOME": f"{mount}/huggingface",
        "TORCHINDUCTOR_CACHE_DIR": f"{mount}/torchinductor",
        "TRITON_CACHE_DIR": f"{mount}/triton",
        "VLLM_CACHE_ROOT": f"{mount}/vllm",
    }
    assert "HF_HUB_OFFLINE" not in env


@pytest.mark.parametrize(
    ("cache", "volume"),
    [
        (
            {"type": "hostPath", "path": "/nvme/models"},
            {"hostPath": {"path": "/nvme/models", "type": "DirectoryOrCreate"}},
        ),
        (
            {"type": "persistentVolumeClaim", "claim_name": "models-rwx"},
            {"persistentVolumeClaim": {"claimName": "models-rwx"}},
        ),
        ({"type": "emptyDir"}, {"emptyDir": {"sizeLimit": "50Gi"}}),
    ],
)
def test_the_cache_can_be_another_node_directory_a_claim_or_the_pods_own(cache, volume):
    rendered_volume = engine_pod(md(weights_cache={"offline": False, "path": None, "claim_name": None, **cache}))[2]
    assert rendered_volume == {"name": "weights", **volume}


def test_offline_once_the_cache_is_complete():
    env = engine_pod(md(weights_cache={"type": "hostPath", "path": None, "claim_name": None, "offline": True}))[0]
    assert env["HF_HUB_OFFLINE"] == "1"


@pytest.mark.parametrize(
    ("cache", "field", "message"),
    [
        ({"type": "persistentVolumeClaim"}, "weights_cache.claim_name", "is required with weights_cache.type"),
        ({"type": "hostPath", "path": "models"}, "weights_cache.path", "'models' is not an absolute path"),
        ({"type": "hostPath", "path": "/var/../etc"}, "weights_cache.path", "no '..'"),
    ],
)
def test_a_bad_cache_names_the_field(cache, field, message):
    with pytest.raises(ValidationError, match=message) as error:
        md(weights_cache={"offline": False, "path": None, "claim_name": None, **cache})
    assert error.value.field == field


@pytest.mark.parametrize("name", ["HF_HUB_OFFLINE", "TRITON_CACHE_DIR"])
def test_the_cache_env_is_the_modules(name):
    with pytest.raises(ValidationError, match="is managed by the module"):
        md(env={name: "x"})


def test_service_selects_the_engine_pods():
    deployment, service = rendered(md())
    assert service["spec"]["ports"][0]["port"] == 8000
    selector = service["spec"]["selector"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= labels.items()
    assert deployment["spec"]["selector"]["matchLabels"] == selector


def test_autoscaling_and_budget_render_hpa_and_pdb_and_leave_replicas_to_the_hpa():
    children = by_kind(
        rendered(
            md(
                autoscaling={"min_replicas": 1, "max_replicas": 3, "target_waiting_requests": 2},
                disruption_budget={"min_available": 1},
            ),
        )
    )
    assert "replicas" not in children["Deployment"]["spec"]
    hpa = children["HorizontalPodAutoscaler"]["spec"]
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (1, 3)
    assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "qwen"}
    assert hpa["metrics"][0]["pods"]["target"]["averageValue"] == "2"
    assert children["PodDisruptionBudget"]["spec"]["minAvailable"] == 1


def test_prefix_caching_off_kv_fp8_revision_and_extra_args():
    model = {**QWEN_05B, "revision": "main"}
    deployment = rendered(
        md(prefix_caching=False, kv_cache_dtype="fp8", extra_args=["--enforce-eager"]), model=model, credentials=False
    )[0]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--no-enable-prefix-caching" in args
    assert args[args.index("--kv-cache-dtype") + 1] == "fp8"
    assert args[args.index("--revision") + 1] == "main"
    assert args[-1] == "--enforce-eager"
    env = {e["name"] for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert "HF_TOKEN" not in env


def test_multinode_replica_is_a_statefulset_of_ranks_on_one_fabric():
    children = rendered(md(gpus_per_replica=2), compute_cluster=PAIR)
    assert [c["kind"] for c in children] == ["Service", "StatefulSet", "Service"]
    ranks, statefulset, front = children
    assert ranks["spec"]["clusterIP"] == "None"
    assert statefulset["spec"]["replicas"] == 2
    assert statefulset["spec"]["serviceName"] == "qwen-ranks"
    pod = statefulset["spec"]["template"]["spec"]
    script = pod["containers"][0]["args"][0]
    assert "--nnodes 2 --node-rank $NODE_RANK --master-addr qwen-0.qwen-ranks.tf.svc" in script
    assert "--tensor-parallel-size 2" in script
    assert "--headless" in script
    affinity = pod["affinity"]
    assert (
        affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"]
        == "tokenfactory.io/fabric"
    )
    assert (
        affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"]
        == "kubernetes.io/hostname"
    )
    assert front["spec"]["selector"]["apps.kubernetes.io/pod-index"] == "0"


def test_nim_and_dynamo_render_operator_objects():
    nim = rendered(md(engine="nim", image="nvcr.io/nim/qwen/qwen2", version="1.0"))
    (nim_service,) = nim
    assert nim_service["kind"] == "NIMService"
    assert nim_service["spec"]["image"] == {
        "repository": "nvcr.io/nim/qwen/qwen2",
        "tag": "1.0",
        "pullPolicy": "IfNotPresent",
    }
    assert nim_service["spec"]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert nim_service["spec"]["authSecret"] == "hf-credentials"
    (graph,) = rendered(md(engine="dynamo"))
    worker = graph["spec"]["services"]["VllmWorker"]
    assert worker["extraPodSpec"]["mainContainer"]["command"] == ["python3", "-m", "dynamo.vllm"]
    assert "Qwen/Qwen2-0.5B-Instruct" in worker["extraPodSpec"]["mainContainer"]["args"]
    assert graph["spec"]["services"]["Frontend"]["componentType"] == "frontend"


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({}, "http://qwen.tf.svc:8000"),
        ({"engine": "dynamo"}, "http://qwen-frontend.tf.svc:8000"),
        ({"upstream_url": "http://127.0.0.1:9000/"}, "http://127.0.0.1:9000"),
    ],
)
def test_upstream_url(overrides, expected):
    obj = md(**overrides)
    assert upstream_url(obj, planned(obj)) == expected
