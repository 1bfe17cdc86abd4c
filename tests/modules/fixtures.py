"""Fixtures for module tests against the lab's real API server (marker `lab`)."""

import pytest

from tests.modules.lab_helpers import client, new_namespace, run_module, self_signed


class TokenFactoryLab:
    """A lab cluster with the Token Factory CRDs installed, and helpers to run modules against it."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.kubeconfig = cluster.kubeconfig
        self.kube = client(cluster.kubeconfig)

    def run(self, module_name, check_mode=False, diff=False, **args):
        return run_module(module_name, self.kubeconfig, check_mode=check_mode, diff=diff, **args)

    def ok(self, module_name, **args):
        result = self.run(module_name, **args)
        assert not result.get("failed"), f"{module_name} failed: {result.get('msg')}"
        return result

    def namespace(self):
        return new_namespace(self.kube)

    def base_objects(self, namespace, cluster_name="spark"):
        """ComputeCluster, Provider (with token), Model, Endpoint: what a ModelDeployment needs."""
        self.ok("compute_cluster", name=cluster_name, namespace=namespace)
        self.ok("provider", name="hf", namespace=namespace, type="huggingface", token="hf_lab_token_value")
        self.ok("model", name="qwen", namespace=namespace, provider="hf", source="Qwen/Qwen2-0.5B-Instruct")
        cert, key = self_signed("llm.example.com")
        self.ok(
            "endpoint",
            name="public",
            namespace=namespace,
            hostname="llm.example.com",
            compute_cluster=cluster_name,
            tls_cert=cert,
            tls_key=key,
        )
        return namespace


def start_tf_lab(cluster):
    lab = TokenFactoryLab(cluster)
    lab.ok("crds")
    return lab


@pytest.fixture(scope="session")
def tf_lab(lab_cluster):
    """spark-single lab (one GB10 node) with the CRDs installed."""
    return start_tf_lab(lab_cluster)


@pytest.fixture
def tf_namespace(tf_lab):
    """A fresh namespace with the base objects; its ModelDeployments are deleted afterwards (frees the GPU)."""
    from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.kinds import MODEL_DEPLOYMENT

    namespace = tf_lab.base_objects(tf_lab.namespace())
    yield namespace
    for md in tf_lab.kube.list(MODEL_DEPLOYMENT, namespace):
        tf_lab.ok("model_deployment", name=md["metadata"]["name"], namespace=namespace, state="absent")
