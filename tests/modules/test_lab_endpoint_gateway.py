"""Endpoint status says whether the gateway behind it serves: Pending while its Service is missing or has no
ready pod, Ready once a pod is ready (the EndpointSlice controller of the real control plane decides; kwok runs
the pod)."""

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import DEPLOYMENT, SERVICE
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.waiter import poll

pytestmark = pytest.mark.lab


def gateway(namespace, replicas):
    labels = {"app.kubernetes.io/name": "gw"}
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "gw", "namespace": namespace},
        "spec": {"selector": labels, "ports": [{"name": "http", "port": 8080}]},
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "gw", "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "gateway", "image": "localhost/tokenfactory-gateway:0.1.0"}]},
            },
        },
    }
    return service, deployment


def test_endpoint_phase_follows_the_gateway_pods(tf_lab):
    namespace = tf_lab.namespace()
    tf_lab.ok("compute_cluster", name="spark", namespace=namespace)
    args = {
        "name": "public",
        "namespace": namespace,
        "hostname": "llm.example.com",
        "compute_cluster": "spark",
        "gateway": {"service_name": "gw", "namespace": namespace},
    }
    missing = tf_lab.ok("endpoint", **args)["endpoint"]["status"]
    assert missing["phase"] == "Pending"
    assert missing["message"] == f"gateway Service {namespace}/gw does not exist (deploy the gateway role)"

    service, deployment = gateway(namespace, replicas=0)
    tf_lab.kube.apply(service)
    tf_lab.kube.apply(deployment)
    idle = tf_lab.ok("endpoint", **args)
    assert idle["endpoint"]["status"]["phase"] == "Pending"
    assert idle["endpoint"]["status"]["message"] == f"gateway Service {namespace}/gw has no ready gateway pod"

    tf_lab.kube.apply(gateway(namespace, replicas=2)[1])

    def ready():
        status = tf_lab.ok("endpoint", **args)["endpoint"]["status"]
        return status if status["phase"] == "Ready" and status["gatewayReadyPods"] == 2 else None, status

    status = poll("the Endpoint to see 2 ready gateway pods", ready, 90, interval=2)
    assert status["message"] == f"gateway Service {namespace}/gw: 2 ready gateway pod(s)"
    assert status["baseURL"] == "http://llm.example.com/v1"
    tf_lab.kube.delete(DEPLOYMENT, "gw", namespace)
    tf_lab.kube.delete(SERVICE, "gw", namespace)
