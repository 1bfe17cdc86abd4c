"""The kubernetes role on the real pair: the built binaries and the kubelet unit on both nodes; the kubeadm config,
PKI and API server certificate on the control plane (conftest.py's `first`); the controller's admin kubeconfig."""

import ipaddress
import os
import pathlib
import stat

import kubernetes
import pytest
import yaml
from cryptography import x509
from lab.versions import kube_tag

pytestmark = pytest.mark.molecule

VERSION = kube_tag()
FIRST, SECOND = "tf-spark-01", "tf-spark-02"
# group_vars/tf_scenario.yml's kubernetes_extra_sans.
EXTRA_SANS = {"spark.tokenfactory.test", "10.20.30.40"}
# The first node's IP: its CX-7 link address (inventories/spark-pair: connectx_link_cidr 192.168.100.0/30).
NODE_IP = "192.168.100.1"


@pytest.fixture(scope="module")
def kubeadm_config(first):
    docs = list(yaml.safe_load_all(first.file("/etc/kubernetes/kubeadm-config.yaml").content_string))
    return {doc["kind"]: doc for doc in docs}


@pytest.fixture(scope="module")
def management_ip(first):
    """The address the controller reaches the first node on (eth0; the link is not the controller's)."""
    return first.check_output("ip -4 -o addr show dev eth0").split()[3].split("/")[0]


def test_binaries_are_the_built_release(host):
    assert host.check_output("kubeadm version -o short") == VERSION
    assert host.check_output("kubelet --version") == f"Kubernetes {VERSION}"
    kubectl = yaml.safe_load(host.check_output("kubectl version --client -o yaml"))
    assert kubectl["clientVersion"]["gitVersion"] == VERSION


def test_kubelet_runs_from_the_unit_with_the_kubeadm_dropin(host):
    kubelet = host.service("kubelet")
    assert kubelet.is_enabled and kubelet.is_running
    drop_ins = host.check_output("systemctl show -p DropInPaths --value kubelet")
    assert "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf" in drop_ins
    exec_start = host.check_output("systemctl show -p ExecStart --value kubelet")
    assert "path=/usr/local/bin/kubelet" in exec_start
    assert "$KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS" in exec_start
    # kubeadm wrote the node IP into the flags file the drop-in reads.
    assert "--node-ip=" in host.file("/var/lib/kubelet/kubeadm-flags.env").content_string


def test_kubeadm_config_rendered_private_and_valid(first, kubeadm_config):
    assert first.file("/etc/kubernetes/kubeadm-config.yaml").mode == 0o600
    init, cluster = kubeadm_config["InitConfiguration"], kubeadm_config["ClusterConfiguration"]
    assert init["localAPIEndpoint"]["advertiseAddress"] == NODE_IP
    # The first Spark serves its GPU too: registered without the control-plane taint; one named preflight exception.
    assert init["nodeRegistration"]["taints"] == []
    assert init["nodeRegistration"]["ignorePreflightErrors"] == ["SystemVerification"]
    assert cluster["networking"] == {"podSubnet": "10.244.0.0/16", "serviceSubnet": "10.96.0.0/12"}
    assert cluster["controlPlaneEndpoint"] == f"{NODE_IP}:6443"
    assert cluster["imageRepository"] == "registry.k8s.io"
    assert kubeadm_config["KubeProxyConfiguration"]["conntrack"] == {"maxPerCore": 0}
    assert first.run("kubeadm config validate --config /etc/kubernetes/kubeadm-config.yaml").rc == 0


def test_apiserver_certificate_carries_the_configured_sans(first, management_ip):
    pem = first.file("/etc/kubernetes/pki/apiserver.crt").content
    sans = x509.load_pem_x509_certificate(pem).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    names = set(sans.get_values_for_type(x509.DNSName))
    ips = {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
    assert {FIRST, "spark.tokenfactory.test", "kubernetes.default.svc"} <= names
    # First address of the service CIDR (the kubernetes Service), the node IP, the address in the controller's
    # kubeconfig and the extra IP SAN.
    assert {str(ipaddress.ip_network("10.96.0.0/12")[1]), NODE_IP, management_ip, "10.20.30.40"} <= ips


def test_pki_private_on_the_control_plane(first):
    for name in ("ca.key", "apiserver.key", "sa.key", "front-proxy-ca.key", "etcd/ca.key"):
        assert first.file(f"/etc/kubernetes/pki/{name}").mode == 0o600, name
    assert first.file("/etc/kubernetes/manifests/kube-apiserver.yaml").exists


def test_join_config_gone(host):
    assert not host.file("/etc/kubernetes/kubeadm-join.yaml").exists


def test_admin_kubeconfig_on_the_controller_is_private_and_works(management_ip):
    path = pathlib.Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "tokenfactory-admin.conf")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    config = yaml.safe_load(path.read_text())
    assert config["clusters"][0]["cluster"]["server"] == f"https://{management_ip}:6443"
    assert config["users"][0]["name"] == "kubernetes-admin"
    # The controller reaches the real API server with it.
    api = kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(str(path)))
    assert sorted(node.metadata.name for node in api.list_node().items) == [FIRST, SECOND]
