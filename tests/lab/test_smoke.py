"""Smoke suite proving the lab is a real Kubernetes control plane (kube-apiserver v1.36.3 built from Go modules).

Only the nodes are simulated (kwok: no kubelet, no containers, no GPU); the apiserver, etcd, controllers,
garbage collector, scheduler and RBAC are the real ones.
"""

import subprocess
import uuid

import pytest
from kubernetes import client, dynamic
from kubernetes.client.exceptions import ApiException

from lab.k8s import bins
from lab.wait import wait_until

pytestmark = pytest.mark.lab

GPU = "nvidia.com/gpu"


@pytest.fixture(scope="module")
def api(lab_cluster):
    with lab_cluster.api_client() as api_client:
        yield api_client


@pytest.fixture
def namespace(api):
    """A fresh namespace; on teardown its pods are deleted and awaited (frees the GPU for the next test)."""
    core = client.CoreV1Api(api)
    name = f"smoke-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    client.AppsV1Api(api).delete_collection_namespaced_deployment(name)
    core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
    wait_until(lambda: not core.list_namespaced_pod(name).items, timeout=60, what=f"pods in {name} deleted")
    core.delete_namespace(name)


def gpu_pod(name, **spec):
    return {
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "containers": [
                {"name": "engine", "image": "lab.invalid/vllm:never-pulled", "resources": {"limits": {GPU: "1"}}}
            ],
            **spec,
        },
    }


def pod_phase(core, namespace, name):
    pod = core.read_namespaced_pod(name, namespace)
    return pod.status.phase, pod.spec.node_name


def unschedulable_message(core, namespace, name):
    pod = core.read_namespaced_pod(name, namespace)
    for cond in pod.status.conditions or []:
        if cond.type == "PodScheduled" and cond.status == "False" and cond.reason == "Unschedulable":
            return cond.message
    return None


def test_server_is_the_pinned_build(api):
    assert client.VersionApi(api).get_code().git_version == bins.KUBE_VERSION
    out = subprocess.run(
        [str(bins.bin_dir() / "kubectl"), "version", "--client", "-o", "json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f'"gitVersion": "{bins.KUBE_VERSION}"' in out


def test_spark_node_as_profiled(api, lab_cluster):
    (node,) = client.CoreV1Api(api).list_node().items
    assert node.metadata.name == lab_cluster.node_names[0]
    labels = node.metadata.labels
    assert labels["kubernetes.io/arch"] == "arm64"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-GB10"
    assert (labels["nvidia.com/gpu.compute.major"], labels["nvidia.com/gpu.compute.minor"]) == ("12", "1")
    assert node.status.allocatable[GPU] == "1"
    assert node.status.capacity["cpu"] == "20"
    assert node.status.capacity["memory"] == "119Gi"


def test_server_side_apply_create_patch_delete(api, namespace):
    configmaps = dynamic.DynamicClient(api).resources.get(api_version="v1", kind="ConfigMap")
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa", "namespace": namespace}}

    dry = configmaps.server_side_apply(body={**body, "data": {"a": "1"}}, field_manager="smoke", dry_run="All")
    assert dry.data.a == "1"
    with pytest.raises(dynamic.exceptions.NotFoundError):
        configmaps.get(name="ssa", namespace=namespace)

    created = configmaps.server_side_apply(body={**body, "data": {"a": "1"}}, field_manager="smoke")
    patched = configmaps.server_side_apply(body={**body, "data": {"a": "1", "b": "2"}}, field_manager="smoke")
    assert patched.metadata.uid == created.metadata.uid
    assert int(patched.metadata.resourceVersion) > int(created.metadata.resourceVersion)
    assert dict(patched.data) == {"a": "1", "b": "2"}
    assert [m.manager for m in patched.metadata.managedFields] == ["smoke"]

    with pytest.raises(dynamic.exceptions.ConflictError):
        configmaps.server_side_apply(body={**body, "data": {"a": "other"}}, field_manager="intruder")
    forced = configmaps.server_side_apply(
        body={**body, "data": {"a": "other"}}, field_manager="intruder", force_conflicts=True
    )
    assert forced.data.a == "other"

    configmaps.delete(name="ssa", namespace=namespace)
    with pytest.raises(dynamic.exceptions.NotFoundError):
        configmaps.get(name="ssa", namespace=namespace)


def test_crd_openapi_schema_rejects_invalid_object(api, namespace):
    group = f"g{uuid.uuid4().hex[:6]}.lab.tokenfactory.io"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1alpha1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "required": ["size"],
                                    "properties": {
                                        "size": {"type": "string", "enum": ["small", "large"]},
                                        "replicas": {"type": "integer", "minimum": 1},
                                    },
                                }
                            },
                        }
                    },
                }
            ],
        },
    }
    extensions = client.ApiextensionsV1Api(api)
    extensions.create_custom_resource_definition(crd)
    try:
        wait_until(
            lambda: any(
                c.type == "Established" and c.status == "True"
                for c in extensions.read_custom_resource_definition(f"widgets.{group}").status.conditions or []
            ),
            timeout=30,
            what="CRD Established",
        )
        custom = client.CustomObjectsApi(api)

        def widget(name, spec):
            return {"apiVersion": f"{group}/v1alpha1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}

        args = (group, "v1alpha1", namespace, "widgets")
        ok = wait_until(
            lambda: custom.create_namespaced_custom_object(*args, widget("ok", {"size": "small", "replicas": 2})),
            timeout=30,
            what="CRD served",
        )
        assert ok["spec"]["size"] == "small"
        with pytest.raises(ApiException) as rejected:
            custom.create_namespaced_custom_object(*args, widget("bad", {"size": "huge", "replicas": 0}))
        assert rejected.value.status == 422
        assert "spec.size" in rejected.value.body and "Unsupported value" in rejected.value.body
        assert "spec.replicas" in rejected.value.body
        with pytest.raises(ApiException):
            custom.get_namespaced_custom_object(*args, "bad")
    finally:
        extensions.delete_custom_resource_definition(f"widgets.{group}")


def test_deployment_available_on_gb10_node(api, namespace, lab_cluster):
    pod = gpu_pod("engine", nodeSelector={"nvidia.com/gpu.product": "NVIDIA-GB10"})
    deployment = {
        "metadata": {"name": "engine"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "engine"}}, "template": pod},
    }
    apps = client.AppsV1Api(api)
    apps.create_namespaced_deployment(namespace, deployment)

    def available():
        status = apps.read_namespaced_deployment_status("engine", namespace).status
        return any(c.type == "Available" and c.status == "True" for c in status.conditions or [])

    wait_until(available, timeout=90, what="Deployment Available")
    (running,) = client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector="app=engine").items
    assert running.status.phase == "Running"
    assert running.spec.node_name == lab_cluster.node_names[0]


def test_second_pod_for_the_only_gpu_stays_pending(api, namespace, lab_cluster):
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(namespace, gpu_pod("first"))
    wait_until(lambda: pod_phase(core, namespace, "first")[0] == "Running", timeout=60, what="first pod Running")

    core.create_namespaced_pod(namespace, gpu_pod("second"))
    message = wait_until(lambda: unschedulable_message(core, namespace, "second"), timeout=60, what="Unschedulable")
    assert f"Insufficient {GPU}" in message
    assert pod_phase(core, namespace, "second") == ("Pending", None)

    # Only the GPU was missing: freeing it lets the real scheduler place the waiting pod.
    core.delete_namespaced_pod("first", namespace, grace_period_seconds=0)
    wait_until(
        lambda: pod_phase(core, namespace, "second") == ("Running", lab_cluster.node_names[0]),
        timeout=90,
        what="second pod scheduled once the GPU is free",
    )


def test_garbage_collection_of_owned_object(api, namespace):
    core = client.CoreV1Api(api)
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    reference = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
    core.create_namespaced_secret(namespace, {"metadata": {"name": "owned", "ownerReferences": [reference]}})
    core.create_namespaced_secret(namespace, {"metadata": {"name": "unowned"}})

    core.delete_namespaced_config_map("owner", namespace, propagation_policy="Background")

    def owned_gone():
        names = {s.metadata.name for s in core.list_namespaced_secret(namespace).items}
        return "owned" not in names

    wait_until(owned_gone, timeout=60, what="garbage collector to delete the owned Secret")
    core.read_namespaced_secret("unowned", namespace)


def test_service_account_without_rights_is_forbidden(api, namespace, lab_cluster):
    core = client.CoreV1Api(api)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "nobody"}})
    token = core.create_namespaced_service_account_token(
        "nobody", namespace, {"spec": {"expirationSeconds": 600}}
    ).status.token

    configuration = client.Configuration()
    configuration.host = lab_cluster.server
    configuration.ssl_ca_cert = str(lab_cluster.dir / "pki" / "ca.crt")
    configuration.api_key = {"authorization": token}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    with client.ApiClient(configuration) as as_nobody:
        with pytest.raises(ApiException) as denied:
            client.CoreV1Api(as_nobody).list_namespaced_pod(namespace)
        assert denied.value.status == 403
        assert f"system:serviceaccount:{namespace}:nobody" in denied.value.body

        rbac = client.RbacAuthorizationV1Api(api)
        rule = {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}
        rbac.create_namespaced_role(namespace, {"metadata": {"name": "pod-reader"}, "rules": [rule]})
        rbac.create_namespaced_role_binding(
            namespace,
            {
                "metadata": {"name": "nobody-reads-pods"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "nobody", "namespace": namespace}],
            },
        )
        wait_until(lambda: client.CoreV1Api(as_nobody).list_namespaced_pod(namespace), timeout=30, what="RBAC grant")
        with pytest.raises(ApiException) as still_denied:
            client.CoreV1Api(as_nobody).list_namespaced_secret(namespace)
        assert still_denied.value.status == 403


def test_spark_pair_shares_fabric_and_spreads_gpu_pods(lab_cluster_factory):
    pair = lab_cluster_factory("spark-pair")
    with pair.api_client() as pair_api:
        core = client.CoreV1Api(pair_api)
        nodes = core.list_node().items
        assert sorted(n.metadata.name for n in nodes) == pair.node_names
        fabrics = {n.metadata.labels["tokenfactory.io/fabric"] for n in nodes}
        assert len(fabrics) == 1 and fabrics != {""}
        assert {n.metadata.labels["nvidia.com/gpu.product"] for n in nodes} == {"NVIDIA-GB10"}

        # One GPU per Spark: two single-GPU pods must land on different nodes.
        ranks = ("rank-0", "rank-1")
        for name in ranks:
            core.create_namespaced_pod("default", gpu_pod(name))
        wait_until(
            lambda: {pod_phase(core, "default", r) for r in ranks} == {("Running", n) for n in pair.node_names},
            timeout=90,
            what="one GPU pod Running per Spark",
        )


def test_mixed_fleet_places_pods_by_gpu_product(lab_cluster_factory):
    mixed = lab_cluster_factory("mixed")
    with mixed.api_client() as mixed_api:
        core = client.CoreV1Api(mixed_api)
        hopper = gpu_pod("hopper", nodeSelector={"nvidia.com/gpu.family": "hopper"})
        hopper["spec"]["containers"][0]["resources"]["limits"][GPU] = "4"
        core.create_namespaced_pod("default", hopper)
        wait_until(lambda: pod_phase(core, "default", "hopper") == ("Running", "h100-01"), timeout=60, what="H100 pod")
        # Two GPUs on one arm64 node do not exist in this fleet (each Spark has one).
        greedy = gpu_pod("greedy", nodeSelector={"kubernetes.io/arch": "arm64"})
        greedy["spec"]["containers"][0]["resources"]["limits"][GPU] = "2"
        core.create_namespaced_pod("default", greedy)
        message = wait_until(lambda: unschedulable_message(core, "default", "greedy"), timeout=60, what="Pending")
        assert f"Insufficient {GPU}" in message
