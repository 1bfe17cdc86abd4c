"""Templates of the host roles rendered with Ansible's templar: netplan, kubeadm config, containerd configs."""

import pathlib

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible_collections.tokenfactory.spark.plugins.filter.network import checked_cidr

ROOT = pathlib.Path(__file__).resolve().parents[3]
ROLES = ROOT / "roles"


def render(role, template, **variables):
    loader = DataLoader()
    loader.set_basedir(str(ROLES / role / "templates"))
    source = (ROLES / role / "templates" / template).read_text()
    templar = Templar(loader=loader, variables=variables)
    # The collection's filters, registered directly (the plugin loader's path set-up is global state).
    templar.environment.filters["tokenfactory.spark.checked_cidr"] = checked_cidr
    return templar.template(trust_as_template(source))


def test_netplan_for_the_cx7_link():
    text = render(
        "connectx",
        "40-cx7.yaml.j2",
        connectx_iface="enp1s0f0np0",
        connectx_mtu=9000,
        connectx_address="192.168.100.1/30",
        connectx_fabric_name="spark_pair",
    )
    eth = yaml.safe_load(text)["network"]["ethernets"]["enp1s0f0np0"]
    assert eth == {
        "renderer": "networkd",
        "dhcp4": False,
        "dhcp6": False,
        "mtu": 9000,
        "addresses": ["192.168.100.1/30"],
    }


def test_fabric_env_prefers_the_rdma_device_for_ucx():
    text = render(
        "connectx",
        "fabric.env.j2",
        connectx_fabric_name="f",
        connectx_peer_ip="192.168.100.2",
        connectx_iface="enp1s0f0np0",
        connectx_ucx_device="rocep1s0f0:1",
        connectx_rdma_port={"ibdev": "rocep1s0f0"},
    )
    assert "UCX_NET_DEVICES=rocep1s0f0:1" in text
    assert "NCCL_IB_HCA=rocep1s0f0" in text
    assert "NCCL_SOCKET_IFNAME=enp1s0f0np0" in text


def kubeadm_docs(**overrides):
    variables = {
        "inventory_hostname": "spark-1",
        "kubernetes_cri_socket": "unix:///run/containerd/containerd.sock",
        "kubernetes_node_ip": "192.168.1.10",
        "kubernetes_cluster_name": "tf",
        "kubernetes_version": "1.36.3",
        "kubernetes_control_plane_endpoint": "192.168.1.10:6443",
        "kubernetes_pod_cidr": "10.244.0.0/16",
        "kubernetes_service_cidr": "10.96.0.0/12",
        "kubernetes_extra_sans": ["spark.example"],
        **overrides,
    }
    return list(yaml.safe_load_all(render("kubernetes", "kubeadm-config.yaml.j2", **variables)))


def test_kubeadm_config_carries_cidrs_sans_and_systemd_driver():
    init, cluster, kubelet = kubeadm_docs()
    assert init["localAPIEndpoint"]["advertiseAddress"] == "192.168.1.10"
    assert cluster["networking"] == {"podSubnet": "10.244.0.0/16", "serviceSubnet": "10.96.0.0/12"}
    assert cluster["apiServer"]["certSANs"] == ["192.168.1.10", "spark-1", "spark.example"]
    assert kubelet["cgroupDriver"] == "systemd"


def test_kubeadm_config_rejects_a_bad_pod_cidr():
    with pytest.raises(Exception, match=r"kubernetes_pod_cidr='10\.244\.1\.0/16' has host bits set"):
        kubeadm_docs(kubernetes_pod_cidr="10.244.1.0/16")


CONTAINERD = {
    "containerd_dropin_dir": "/etc/containerd/conf.d",
    "containerd_nvidia_dropin": "/etc/containerd/conf.d/99-nvidia.toml",
    "containerd_certs_dir": "/etc/containerd/certs.d",
    "containerd_cri_runtime_plugin": {2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime"},
    "containerd_cri_images_plugin": {2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.images"},
    "containerd_cdi": True,
    "containerd_sandbox_image": "registry.k8s.io/pause:3.10",
    "containerd_systemd_cgroup": True,
    "containerd_nvidia_default_runtime": False,
    "containerd_nvidia_runtime_binary": "/usr/bin/nvidia-container-runtime",
}


@pytest.mark.parametrize("schema", [2, 3])
def test_containerd_main_config_has_no_nvidia_and_dropin_repeats_cri(schema):
    import tomllib

    main = tomllib.loads(render("containerd", "config.toml.j2", containerd_schema=schema, **CONTAINERD))
    dropin = tomllib.loads(render("containerd", "99-nvidia.toml.j2", containerd_schema=schema, **CONTAINERD))
    runtime = CONTAINERD["containerd_cri_runtime_plugin"][schema]
    assert main["version"] == dropin["version"] == schema
    assert "nvidia" not in main["plugins"][runtime]["containerd"]["runtimes"]
    drop_runtimes = dropin["plugins"][runtime]["containerd"]["runtimes"]
    assert drop_runtimes["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    # containerd replaces a plugin table from an import wholesale: the drop-in must keep runc's settings.
    assert drop_runtimes["runc"]["options"]["SystemdCgroup"] is True
    assert dropin["plugins"][runtime]["enable_cdi"] is True
    if schema == 3:
        assert main["plugins"]["io.containerd.cri.v1.images"]["pinned_images"]["sandbox"].startswith("registry.k8s.io")
    else:
        assert main["plugins"][runtime]["sandbox_image"].startswith("registry.k8s.io")


@pytest.mark.parametrize("mtu", [0, 8950])
def test_cilium_values_carry_the_pod_cidr_and_optional_mtu(mtu):
    values = yaml.safe_load(render("cni", "cilium-values.yaml.j2", cni_pod_cidr="10.244.0.0/16", cni_mtu=mtu))
    assert values["ipam"] == {"mode": "cluster-pool", "operator": {"clusterPoolIPv4PodCIDRList": ["10.244.0.0/16"]}}
    assert values.get("MTU") == (mtu or None)
