"""The status keeper keeps ModelDeployment and Endpoint status current between module runs (real API server,
scheduler, controllers, kwok), signed in the way it is in a pod: with a token of its own service account (the
gateway role's rendered ServiceAccount and ClusterRole) read from the in-cluster token file.

A deployment the module left Ready turns Failed with CrashLoopBackOff in its message once its pod's status says the
container crash-loops (set as a kubelet reports it; kwok leaves a running pod alone), and Ready again once it runs;
nothing is written while nothing changes; an Endpoint's phase follows its gateway's pods; and the gateway, which
routes by the stored phase, drops the crash-looping deployment and takes it back."""

import base64
import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse

import openai
import pytest
from kubernetes.config import incluster_config
from lab.k8s import bins
from lab.wait import wait_until
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import (
    DEPLOYMENT,
    POD,
    SECRET,
    SERVICE,
    K8sError,
    KubeClient,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.domain import MANAGED_BY
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines.workload import (
    MODEL_DEPLOYMENT_LABEL,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.kinds import ENDPOINT, MODEL_DEPLOYMENT
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.status import gateway_state
from tokenfactory_status_keeper.keeper import Keeper
from tokenfactory_status_keeper.loop import run
from tokenfactory_status_keeper.tls_copy import TlsCopy

from tests.engine.synthetic import SyntheticUpstream
from tests.modules.lab_helpers import self_signed
from tests.modules.test_lab_endpoint_gateway import gateway
from tests.playbooks.ansible_run import ROOT, render_role

pytestmark = pytest.mark.lab
MERGE = "application/merge-patch+json"
INTERVAL = 0.5
KEEPER_MODULE = "tokenfactory_status_keeper"
# As in the gateway image: the keeper's package beside the collection's (and kubernetes.core's) module_utils.
KEEPER_PATH = os.pathsep.join(str(ROOT / path) for path in ("services/status_keeper", ".collections"))
CRASH = {
    "waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s restarting failed container=engine"},
}


def sign_in_as_keeper(tf_lab, tmp_path, monkeypatch, role_vars):
    """The keeper's identity rendered by the role with role_vars (its ServiceAccount, ClusterRole and binding, and
    the Roles and RoleBindings rendered beside them), applied; then a KubeClient configured as the keeper's in its
    pod: no options, the service account token and CA in the in-cluster files, KUBERNETES_SERVICE_HOST/PORT.
    Returns (client, identity)."""
    namespace, keeper = role_vars["gateway_namespace"], f"{role_vars['gateway_name']}-status-keeper"
    rendered = render_role(tmp_path, "tokenfactory.spark.gateway", "render", ["gateway_manifests"], role_vars)
    identity = [
        m
        for m in rendered["gateway_manifests"]
        if m["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
        and m["metadata"]["name"].startswith(keeper)
    ]
    listed = json.dumps({"kind": "List", "apiVersion": "v1", "items": identity})
    subprocess.run([*kubectl(tf_lab), "apply", "-f", "-"], input=listed, text=True, check=True, capture_output=True)
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{keeper}/token"
    token = tf_lab.kube.request("POST", path, request)["status"]["token"]
    (tmp_path / "token").write_text(token)
    server = urllib.parse.urlsplit(tf_lab.cluster.server)
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(tmp_path / "token"))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(tf_lab.cluster.dir / "pki" / "ca.crt"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", server.hostname)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(server.port))
    for variable in ("KUBECONFIG", "K8S_AUTH_KUBECONFIG", "K8S_AUTH_HOST", "K8S_AUTH_API_KEY", "K8S_AUTH_CONTEXT"):
        monkeypatch.delenv(variable, raising=False)
    return KubeClient({}, field_manager=MANAGED_BY), identity


def kubectl(tf_lab):
    return [bins.kubectl(), f"--kubeconfig={tf_lab.kubeconfig}"]


def delete_identity(tf_lab, identity):
    for manifest in reversed(identity):
        meta = manifest["metadata"]
        where = ["-n", meta["namespace"]] if "namespace" in meta else []
        subprocess.run([*kubectl(tf_lab), "delete", manifest["kind"].lower(), meta["name"], *where,
                        "--ignore-not-found"], check=False, capture_output=True)  # fmt: skip


@pytest.fixture
def keeper_client(tf_lab, tmp_path, monkeypatch):
    """A KubeClient signed in as the keeper in its pod, the account bound to the role's rendered ClusterRole."""
    namespace = tf_lab.namespace()
    client, identity = sign_in_as_keeper(
        tf_lab, tmp_path, monkeypatch, {"gateway_namespace": namespace, "gateway_name": namespace}
    )
    assert [m["kind"] for m in identity] == ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"], identity
    yield client
    delete_identity(tf_lab, identity)


def report(client, pod, ready, waiting=None):
    """Set the pod's container status as a kubelet reports it: running and ready, or waiting (crash loop)."""
    container = pod["spec"]["containers"][0]
    state = {"waiting": waiting} if waiting else {"running": {"startedAt": "2026-12-05T10:00:00Z"}}
    status = {"name": container["name"], "image": container["image"], "imageID": "", "ready": ready,
              "started": ready, "restartCount": 3 if waiting else 0, "state": state}  # fmt: skip
    if waiting:
        status["lastState"] = {"terminated": {"exitCode": 1, "reason": "Error"}}
    value = "True" if ready else "False"
    conditions = [{"type": t, "status": value} for t in ("Ready", "ContainersReady")]
    conditions += [{"type": t, "status": "True"} for t in ("Initialized", "PodScheduled")]
    body = {"status": {"conditions": conditions, "containerStatuses": [status]}}
    meta = pod["metadata"]
    client.request("PATCH", POD.path(meta["namespace"], meta["name"], "status"), body, None, MERGE)


def available(client, namespace, name, count):
    wait_until(
        lambda: (
            ((client.get(DEPLOYMENT, name, namespace) or {}).get("status", {}).get("availableReplicas") or 0) == count
        ),
        60,
        f"Deployment {name} to have {count} available replica(s)",
        interval=0.3,
    )


def versions(client, namespace):
    return {
        (rtype.kind, o["metadata"]["name"]): o["metadata"]["resourceVersion"]
        for rtype in (MODEL_DEPLOYMENT, ENDPOINT)
        for o in client.list(rtype, namespace)
    }


def test_a_crash_loop_after_ready_turns_failed_and_back_without_a_module_run(tf_lab, tf_namespace, keeper_client):
    namespace, admin = tf_namespace, tf_lab.kube
    deployed = tf_lab.ok("model_deployment", name="qwen", namespace=namespace, model="qwen", endpoint="public",
                         gpu_type="NVIDIA-GB10")  # fmt: skip
    assert deployed["status"]["phase"] == "Ready", deployed["status"]
    with pytest.raises(K8sError) as denied:  # least privilege: the keeper's account reads no Secrets
        keeper_client.list(SECRET, namespace)
    assert denied.value.status == 403

    keeper = Keeper(keeper_client, namespace)
    before = versions(admin, namespace)
    unchanged = keeper.run_pass()
    assert unchanged["unchanged"] == 2 and unchanged["written"] == 0, unchanged  # what the modules wrote, as is
    assert versions(admin, namespace) == before

    (pod,) = admin.list(POD, namespace, f"{MODEL_DEPLOYMENT_LABEL}=qwen")
    report(admin, pod, ready=False, waiting=CRASH["waiting"])
    available(admin, namespace, "qwen", 0)
    stale = admin.get(MODEL_DEPLOYMENT, "qwen", namespace)
    crashed = keeper.run_pass()
    assert crashed["written"] == 1 and crashed["unchanged"] == 1, crashed
    status = admin.get(MODEL_DEPLOYMENT, "qwen", namespace)["status"]
    assert status["phase"] == "Failed" and status["readyReplicas"] == 0, status
    started = time.monotonic()
    with pytest.raises(K8sError) as conflict:  # a write computed from an older version is refused, not retried
        keeper.write(MODEL_DEPLOYMENT, stale, stale["status"])
    assert conflict.value.status == 409 and time.monotonic() - started < 5
    assert admin.get(MODEL_DEPLOYMENT, "qwen", namespace)["status"]["phase"] == "Failed"
    assert f"{pod['metadata']['name']}: container engine CrashLoopBackOff" in status["message"], status["message"]
    assert "last exit code 1 (Error), restarts 3" in status["message"]
    assert {k: v for k, v in status.items() if k not in ("phase", "message", "readyReplicas")} == {
        k: v for k, v in deployed["status"].items() if k not in ("phase", "message", "readyReplicas")
    }, "only the observed fields change; the module's plan stays as it wrote it"

    # As a loop: back to Ready once the pod runs again, then no write while nothing changes.
    stop = threading.Event()
    loop = threading.Thread(target=run, args=(keeper, INTERVAL, stop), daemon=True)
    loop.start()
    try:
        report(admin, pod, ready=True)
        wait_until(
            lambda: admin.get(MODEL_DEPLOYMENT, "qwen", namespace)["status"]["phase"] == "Ready",
            60,
            "the keeper to write Ready again",
            interval=0.3,
        )
        settled = versions(admin, namespace)
        stop.wait(6 * INTERVAL)
        assert versions(admin, namespace) == settled, "no write while nothing changes"
    finally:
        stop.set()
        loop.join(timeout=30)
    assert admin.get(MODEL_DEPLOYMENT, "qwen", namespace)["status"] == deployed["status"], "as the module wrote it"


def test_the_endpoint_phase_follows_the_gateway_pods(tf_lab, keeper_client):
    namespace = tf_lab.namespace()
    tf_lab.ok("compute_cluster", name="spark", namespace=namespace)
    written = tf_lab.ok("endpoint", name="own", namespace=namespace, hostname="llm.example.com",
                        compute_cluster="spark", gateway={"service_name": "gw", "namespace": namespace})  # fmt: skip
    assert written["endpoint"]["status"]["phase"] == "Pending"

    def endpoint_status():
        return tf_lab.kube.get(ENDPOINT, "own", namespace)["status"]

    stop = threading.Event()
    loop = threading.Thread(target=run, args=(Keeper(keeper_client, namespace), INTERVAL, stop), daemon=True)
    loop.start()
    try:
        service, deployment = gateway(namespace, replicas=2)
        tf_lab.kube.apply(service)
        tf_lab.kube.apply(deployment)
        wait_until(
            lambda: endpoint_status()["gatewayReadyPods"] == 2, 90, "the keeper to see 2 gateway pods", interval=0.3
        )
        assert endpoint_status()["phase"] == "Ready"
        assert endpoint_status()["message"] == f"gateway Service {namespace}/gw: 2 ready gateway pod(s)"
        tf_lab.kube.apply(gateway(namespace, replicas=0)[1])
        wait_until(
            lambda: endpoint_status()["phase"] == "Pending", 90, "the keeper to see no gateway pod", interval=0.3
        )
        assert endpoint_status()["message"] == f"gateway Service {namespace}/gw has no ready gateway pod"
    finally:
        stop.set()
        loop.join(timeout=30)
    try:
        # The entry point the role's Deployment runs, one pass (signed in from a kubeconfig here).
        tf_lab.kube.apply(gateway(namespace, replicas=1)[1])
        ready = {"serviceName": "gw", "namespace": namespace}
        wait_until(lambda: gateway_state(tf_lab.kube, ready)[2] == 1, 90, "1 ready gateway pod", interval=0.3)
        once = subprocess.run(
            [sys.executable, "-m", KEEPER_MODULE, "--once", "--namespace", namespace],
            env={**os.environ, "K8S_AUTH_KUBECONFIG": str(tf_lab.kubeconfig), "PYTHONPATH": KEEPER_PATH},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert once.returncode == 0, once.stderr
        assert f"Endpoint {namespace}/own: Pending -> Ready, 1 gateway pod(s) ready" in once.stderr, once.stderr
        assert endpoint_status()["gatewayReadyPods"] == 1
    finally:
        tf_lab.kube.delete(DEPLOYMENT, "gw", namespace)
        tf_lab.kube.delete(SERVICE, "gw", namespace)


@pytest.mark.gateway
def test_the_gateway_stops_routing_a_crash_looping_deployment_once_the_keeper_wrote_it(
    tf_lab, tf_namespace, keeper_client, gateway_factory
):
    """The gap the keeper closes: the gateway routes by the stored phase; without a module run it drops a deployment
    whose engine crash-loops, and takes it back once the engine runs again."""
    namespace, admin = tf_namespace, tf_lab.kube
    with SyntheticUpstream(model="qwen") as upstream:
        deployed = tf_lab.ok("model_deployment", name="qwen", namespace=namespace, model="qwen", endpoint="public",
                             gpu_type="NVIDIA-GB10", tenants=["acme"], upstream_url=upstream.base_url)  # fmt: skip
        assert deployed["status"]["phase"] == "Ready", deployed["status"]
        gw = gateway_factory([], routing_source="kubernetes", kubeconfig=str(tf_lab.kubeconfig),
                             routing_namespace=namespace, routing_refresh_seconds=INTERVAL)  # fmt: skip
        client = openai.OpenAI(base_url=gw.url + "/v1", api_key=gw.create_key("acme"), max_retries=0)
        served = deployed["served_model_name"]
        assert [m.id for m in client.models.list()] == [served]

        stop = threading.Event()
        loop = threading.Thread(target=run, args=(Keeper(keeper_client, namespace), INTERVAL, stop), daemon=True)
        loop.start()
        try:
            (pod,) = admin.list(POD, namespace, f"{MODEL_DEPLOYMENT_LABEL}=qwen")
            report(admin, pod, ready=False, waiting=CRASH["waiting"])
            wait_until(lambda: [m.id for m in client.models.list()] == [], 60, "the gateway to drop it", interval=0.3)
            assert admin.get(MODEL_DEPLOYMENT, "qwen", namespace)["status"]["phase"] == "Failed"
            with pytest.raises(openai.NotFoundError):
                client.chat.completions.create(model=served, messages=[{"role": "user", "content": "hi"}])
            report(admin, pod, ready=True)
            wait_until(lambda: [m.id for m in client.models.list()] == [served], 60, "routed again", interval=0.3)
        finally:
            stop.set()
            loop.join(timeout=30)


def kubectl_apply(tf_lab, md, **spec):
    """A plain `kubectl apply` of the stored ModelDeployment with `spec` changed (not the module)."""
    body = {
        "apiVersion": md["apiVersion"],
        "kind": md["kind"],
        "metadata": {"name": md["metadata"]["name"], "namespace": md["metadata"]["namespace"]},
        "spec": {**md["spec"], **spec},
    }
    subprocess.run([bins.kubectl(), f"--kubeconfig={tf_lab.kubeconfig}", "apply", "-f", "-"], input=json.dumps(body),
                   text=True, check=True, capture_output=True)  # fmt: skip
    return tf_lab.kube.get(MODEL_DEPLOYMENT, md["metadata"]["name"], md["metadata"]["namespace"])


def spec_manager(obj):
    """The field managers of obj's spec (server-side apply's managedFields)."""
    return {m["manager"] for m in obj["metadata"]["managedFields"] if "f:spec" in (m.get("fieldsV1") or {})}


def test_the_keeper_applies_a_spec_changed_by_kubectl_refuses_one_that_does_not_fit_and_the_module_agrees(
    tf_lab, tf_namespace, keeper_client
):
    namespace, admin = tf_namespace, tf_lab.kube
    options = {"name": "qwen", "namespace": namespace, "model": "qwen", "endpoint": "public", "gpu_type": "NVIDIA-GB10"}
    deployed = tf_lab.ok("model_deployment", **options)
    assert deployed["status"]["plan"]["generation"] == deployed["model_deployment"]["metadata"]["generation"] == 1
    keeper = Keeper(keeper_client, namespace)

    # A new engine argument, applied with kubectl: the keeper plans it and rolls the Deployment, as the module would.
    changed = kubectl_apply(tf_lab, deployed["model_deployment"], extraArgs=["--max-num-seqs=8"])
    assert changed["metadata"]["generation"] == 2
    assert keeper.run_pass()["written"] == 1
    workload = admin.get(DEPLOYMENT, "qwen", namespace)
    assert workload["spec"]["template"]["spec"]["containers"][0]["args"][-1] == "--max-num-seqs=8"
    assert spec_manager(workload) == {MANAGED_BY}, "the keeper applies children as the module: one field manager"
    status = admin.get(MODEL_DEPLOYMENT, "qwen", namespace)["status"]
    assert status["plan"]["generation"] == status["observedGeneration"] == 2 and "refused" not in status
    available(admin, namespace, "qwen", 1)
    wait_until(lambda: keeper.run_pass()["written"] == 0, 60, "the keeper to settle", interval=0.3)
    assert admin.get(MODEL_DEPLOYMENT, "qwen", namespace)["status"]["phase"] == "Ready"

    # More GPUs than the one GB10 has: refused in status with the reason; the running Deployment is not touched.
    before = admin.get(DEPLOYMENT, "qwen", namespace)["metadata"]["resourceVersion"]
    kubectl_apply(tf_lab, changed, replicas=2)
    assert keeper.run_pass()["written"] == 1
    status = admin.get(MODEL_DEPLOYMENT, "qwen", namespace)["status"]
    assert status["refused"]["generation"] == 3 and status["plan"]["generation"] == 2, status
    assert "needs 2 x NVIDIA-GB10 but the compute cluster has 1 allocatable" in status["refused"]["reason"]
    assert status["plan"]["replicas"] == status["replicas"] == 1
    assert admin.get(DEPLOYMENT, "qwen", namespace)["metadata"]["resourceVersion"] == before
    assert keeper.run_pass()["written"] == 0, "a refusal is written once"

    # Back to one replica: planned again; then the module, run with the same spec, changes nothing.
    kubectl_apply(tf_lab, changed, replicas=1)
    assert keeper.run_pass()["written"] == 1
    kept = admin.get(MODEL_DEPLOYMENT, "qwen", namespace)
    assert kept["status"]["plan"]["generation"] == kept["metadata"]["generation"] and "refused" not in kept["status"]
    again = tf_lab.ok("model_deployment", **options, extra_args=["--max-num-seqs=8"])
    assert again["changed"] is False, again.get("diff")
    assert admin.get(DEPLOYMENT, "qwen", namespace)["metadata"]["resourceVersion"] == before


@pytest.fixture
def tls_keeper(tf_lab, tmp_path, monkeypatch):
    """The Endpoint `public` with its TLS Secret `public-tls` in one namespace, the gateway's copy (created with
    another field manager, as the role does) in the gateway's own, and the keeper signed in with the identity the role
    renders for that Endpoint (the two Roles on those two Secrets only)."""
    endpoint_ns, gateway_ns = tf_lab.namespace(), tf_lab.namespace()
    tf_lab.ok("compute_cluster", name="spark", namespace=endpoint_ns)
    cert, key = self_signed("llm.example.com")
    written = tf_lab.ok("endpoint", name="public", namespace=endpoint_ns, hostname="llm.example.com",
                        compute_cluster="spark", tls_cert=cert, tls_key=key)  # fmt: skip
    assert written["tls_secret"] == "public-tls"
    copy = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": f"{gateway_ns}-tls", "namespace": gateway_ns},
            "data": tf_lab.kube.get(SECRET, "public-tls", endpoint_ns)["data"]}  # fmt: skip
    subprocess.run([*kubectl(tf_lab), "apply", "--server-side", "--field-manager=gateway-role", "-f", "-"],
                   input=json.dumps(copy), text=True, check=True, capture_output=True)  # fmt: skip
    role_vars = {"gateway_namespace": gateway_ns, "gateway_name": gateway_ns, "gateway_endpoint": "public",
                 "gateway_endpoint_namespace": endpoint_ns, "gateway_endpoint_tls_source": "public-tls"}  # fmt: skip
    client, identity = sign_in_as_keeper(tf_lab, tmp_path, monkeypatch, role_vars)
    assert sorted((m["kind"], m["metadata"].get("namespace")) for m in identity) == sorted(
        [("ServiceAccount", gateway_ns), ("ClusterRole", None), ("ClusterRoleBinding", None),
         ("Role", endpoint_ns), ("RoleBinding", endpoint_ns), ("Role", gateway_ns), ("RoleBinding", gateway_ns)]
    )  # fmt: skip
    yield client, (endpoint_ns, "public"), (gateway_ns, f"{gateway_ns}-tls")
    delete_identity(tf_lab, identity)


def renew(admin, namespace, name):
    """The Secret's certificate and key replaced in place, as cert-manager renews it; the new (cert, key) PEMs."""
    cert, key = self_signed("llm.example.com")
    data = {"tls.crt": base64.b64encode(cert.encode()).decode(), "tls.key": base64.b64encode(key.encode()).decode()}
    admin.request("PATCH", SECRET.path(namespace, name), {"data": data}, None, MERGE)
    return cert, key


def data_manager(secret):
    """The field managers of the Secret's data (server-side apply's managedFields)."""
    return {m["manager"] for m in secret["metadata"]["managedFields"] if "f:data" in (m.get("fieldsV1") or {})}


def test_a_renewed_endpoint_secret_reaches_the_gateway_copy_without_an_ansible_run(tf_lab, tls_keeper):
    """Across namespaces, with the keeper's own token and the two Roles the role renders: one pass copies a renewed
    Secret (taking the two keys over from the role's field manager), the next writes nothing, and the token reads no
    other Secret in either namespace."""
    client, endpoint, (gateway_ns, copy_name) = tls_keeper
    admin, endpoint_ns = tf_lab.kube, endpoint[0]
    keeper = Keeper(client, gateway_ns, tls_copy=TlsCopy(client, endpoint, (gateway_ns, copy_name)))
    assert keeper.run_pass() == {"checked": 1, "written": 0, "unchanged": 1, "skipped": 0, "conflicts": 0,
                                 "errors": 0}  # fmt: skip

    cert, key = renew(admin, endpoint_ns, "public-tls")
    assert keeper.run_pass()["written"] == 1
    copied = admin.get(SECRET, copy_name, gateway_ns)
    assert copied["data"] == admin.get(SECRET, "public-tls", endpoint_ns)["data"]
    assert base64.b64decode(copied["data"]["tls.crt"]).decode() == cert
    assert base64.b64decode(copied["data"]["tls.key"]).decode() == key
    assert copied["type"] == "kubernetes.io/tls"
    assert data_manager(copied) == {MANAGED_BY}, "the keeper's forced apply took the two keys over"
    again = keeper.run_pass()
    assert again["written"] == 0 and again["unchanged"] == 1, again
    version = copied["metadata"]["resourceVersion"]
    assert admin.get(SECRET, copy_name, gateway_ns)["metadata"]["resourceVersion"] == version, "nothing written"

    # Least privilege: the two named Secrets only; no other Secret, no list, in either namespace.
    for namespace in (endpoint_ns, gateway_ns):
        admin.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "other", "namespace": namespace},
                     "stringData": {"password": "not-for-the-keeper"}})  # fmt: skip
        with pytest.raises(K8sError) as forbidden:
            client.get(SECRET, "other", namespace)
        assert forbidden.value.status == 403
        with pytest.raises(K8sError) as forbidden:
            client.list(SECRET, namespace)
        assert forbidden.value.status == 403
    source = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "public-tls", "namespace": endpoint_ns},
              "data": copied["data"]}  # fmt: skip
    with pytest.raises(K8sError) as forbidden:
        client.apply(source)
    assert forbidden.value.status == 403, "the source is read, never written"

    # The entry point the role's Deployment runs, configured by its variables (signed in from a kubeconfig here).
    cert, key = renew(admin, endpoint_ns, "public-tls")
    env = {**os.environ, "K8S_AUTH_KUBECONFIG": str(tf_lab.kubeconfig), "PYTHONPATH": KEEPER_PATH,
           "TF_STATUS_KEEPER_ENDPOINT": f"{endpoint_ns}/public",
           "TF_STATUS_KEEPER_TLS_COPY": f"{gateway_ns}/{copy_name}"}  # fmt: skip
    once = subprocess.run([sys.executable, "-m", KEEPER_MODULE, "--once", "--namespace", gateway_ns], env=env,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert once.returncode == 0, once.stderr
    line = f"Endpoint {endpoint_ns}/public: TLS Secret {endpoint_ns}/public-tls changed; copied into {gateway_ns}/"
    assert f"{line}{copy_name}" in once.stderr, once.stderr
    assert base64.b64decode(admin.get(SECRET, copy_name, gateway_ns)["data"]["tls.crt"]).decode() == cert
    printed = once.stderr + once.stdout
    secrets = [*cert.splitlines()[1:-1], *key.splitlines()[1:-1], base64.b64encode(key.encode()).decode()[:40]]
    assert not [text for text in secrets if text in printed], "neither the key nor the certificate is logged"
