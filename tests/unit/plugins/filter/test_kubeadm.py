import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.tokenfactory.spark.plugins.filter.containerd import (
    containerd_config_version,
    containerd_images_missing,
)
from ansible_collections.tokenfactory.spark.plugins.filter.kubeadm import (
    kubeadm_init_argv,
    kubeadm_join_argv,
    kubeadm_join_discovery,
    kubeconfig_with_server,
)

HASH = "sha256:" + "ab" * 32
PRINTED = f"kubeadm join 192.168.100.1:6443 --token abcdef.0123456789abcdef --discovery-token-ca-cert-hash {HASH} \n"


def test_worker_join():
    assert kubeadm_join_argv(PRINTED, node_name="spark-2") == [
        "kubeadm",
        "join",
        "192.168.100.1:6443",
        "--token",
        "abcdef.0123456789abcdef",
        "--discovery-token-ca-cert-hash",
        HASH,
        "--node-name",
        "spark-2",
    ]


def test_wrapped_output_is_accepted():
    wrapped = PRINTED.replace(" --discovery", " \\\n    --discovery")
    assert kubeadm_join_argv(wrapped)[2] == "192.168.100.1:6443"


def test_control_plane_join_needs_certificate_key():
    key = "0f" * 32
    argv = kubeadm_join_argv(PRINTED, control_plane=True, certificate_key=key, advertise_address="192.168.100.2")
    assert argv[-5:] == ["--control-plane", "--certificate-key", key, "--apiserver-advertise-address", "192.168.100.2"]
    with pytest.raises(AnsibleFilterError, match="certificate_key"):
        kubeadm_join_argv(PRINTED, control_plane=True)


def test_garbage_output_fails_without_echoing_a_token():
    with pytest.raises(AnsibleFilterError) as err:
        kubeadm_join_argv("kubeadm join 1.2.3.4:6443 --token abcdef.0123456789abcdef")
    assert "0123456789abcdef" not in str(err.value)


def test_init_argv():
    assert kubeadm_init_argv("/etc/kubernetes/kubeadm-config.yaml") == [
        "kubeadm",
        "init",
        "--config",
        "/etc/kubernetes/kubeadm-config.yaml",
    ]
    assert kubeadm_init_argv("/c.yaml", upload_certs=True, skip_phases=["addon/kube-proxy"])[-2:] == [
        "--upload-certs",
        "--skip-phases=addon/kube-proxy",
    ]


@pytest.mark.parametrize(
    ("output", "schema"),
    [
        ("containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3", 2),
        ("containerd containerd.io 1.7.28 b98a3aace656320842a23f4a392a33f46af97866", 2),
        ("containerd github.com/containerd/containerd/v2 v2.1.4 75cb2b7193e4e490e9fbdc236c0e811ccaba3376", 3),
        ("2.0.0", 3),
    ],
)
def test_containerd_schema_follows_version(output, schema):
    assert containerd_config_version(output) == schema


@pytest.mark.parametrize(
    ("output", "message"), [("1.5.9", "too old"), ("3.0.0", "not supported"), ("nope", "cannot find")]
)
def test_containerd_schema_rejects(output, message):
    with pytest.raises(AnsibleFilterError, match=message):
        containerd_config_version(output)


def test_pod_subnet_from_kubeadm_configmap():
    from ansible_collections.tokenfactory.spark.plugins.filter.kubeadm import kubeadm_pod_subnet

    cm = {"data": {"ClusterConfiguration": "networking:\n  podSubnet: 10.244.0.0/16\n  serviceSubnet: 10.96.0.0/12\n"}}
    assert kubeadm_pod_subnet([cm]) == "10.244.0.0/16"
    with pytest.raises(AnsibleFilterError, match="kubeadm-config not found"):
        kubeadm_pod_subnet([])
    with pytest.raises(AnsibleFilterError, match=r"no networking\.podSubnet"):
        kubeadm_pod_subnet({"data": {"ClusterConfiguration": "networking: {}\n"}})


def test_join_discovery_for_a_join_configuration():
    assert kubeadm_join_discovery(PRINTED) == {
        "apiServerEndpoint": "192.168.100.1:6443",
        "token": "abcdef.0123456789abcdef",
        "caCertHashes": [HASH],
    }


def test_join_discovery_never_echoes_the_token():
    with pytest.raises(AnsibleFilterError) as err:
        kubeadm_join_discovery("kubeadm join 1.2.3.4:6443 --token abcdef.0123456789abcdef")
    assert "abcdef.0123456789abcdef" not in str(err.value)


def test_kubeconfig_server_rewritten_for_the_controller():
    config = {
        "clusters": [
            {"name": "k", "cluster": {"server": "https://192.168.100.1:6443", "certificate-authority-data": "x"}}
        ]
    }
    out = kubeconfig_with_server(config, "https://192.0.2.11:6443")
    assert out["clusters"][0]["cluster"] == {"server": "https://192.0.2.11:6443", "certificate-authority-data": "x"}
    assert config["clusters"][0]["cluster"]["server"] == "https://192.168.100.1:6443"  # input untouched
    with pytest.raises(AnsibleFilterError, match="https://"):
        kubeconfig_with_server(config, "192.0.2.11:6443")


LS = """REF                              TYPE                                       DIGEST      SIZE     PLATFORMS
registry.k8s.io/pause:3.10.2     application/vnd.oci.image.manifest.v1+json sha256:aaa   312 KiB  linux/amd64 -
registry.k8s.io/etcd:3.6.8-0     application/vnd.oci.image.manifest.v1+json sha256:bbb   16 MiB   linux/amd64 -
"""


def test_containerd_imports_only_missing_or_changed_images():
    wanted = [
        {"ref": "registry.k8s.io/pause:3.10.2", "archive": "pause.tar", "digest": "sha256:aaa"},
        {"ref": "registry.k8s.io/etcd:3.6.8-0", "archive": "etcd.tar", "digest": "sha256:new"},
        {"ref": "registry.k8s.io/coredns/coredns:v1.14.2", "archive": "coredns.tar"},
        {"ref": "registry.k8s.io/pause:3.10.2", "archive": "pause.tar"},  # no digest: presence is enough
    ]
    missing = containerd_images_missing(wanted, LS)
    assert [i["archive"] for i in missing] == ["etcd.tar", "coredns.tar"]
    with pytest.raises(AnsibleFilterError, match="needs a ref"):
        containerd_images_missing([{"archive": "x.tar"}], LS)
