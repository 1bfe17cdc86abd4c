"""Templates of the host roles rendered with Ansible's templar: netplan, kubeadm config, containerd configs."""

import pathlib

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible_collections.tokenfactory.spark.plugins.filter.kubelet import kubelet_configuration
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


SPARK_PROFILE = yaml.safe_load((ROLES / "kubernetes" / "vars" / "main.yml").read_text())["kubernetes_kubelet_profiles"]


def kubeadm_docs(**overrides):
    variables = {
        "inventory_hostname": "spark-1",
        "kubernetes_cri_socket": "unix:///run/containerd/containerd.sock",
        "kubernetes_node_ip": "192.168.100.1",
        "kubernetes_cluster_name": "tf",
        "kubernetes_version": "1.36.3",
        "kubernetes_image_repository": "registry.k8s.io",
        "kubernetes_control_plane_endpoint": "192.168.100.1:6443",
        "kubernetes_kubeconfig_server": "https://192.0.2.11:6443",
        "kubernetes_pod_cidr": "10.244.0.0/16",
        "kubernetes_service_cidr": "10.96.0.0/12",
        "kubernetes_extra_sans": ["spark.example"],
        "kubernetes_untaint_control_plane": True,
        "kubernetes_ignore_preflight_errors": [],
        "kubernetes_kubelet_config": kubelet_configuration(SPARK_PROFILE["spark"], reserved_system_cpus="2,7"),
        "kubernetes_kube_proxy_config": {},
        **overrides,
    }
    docs = yaml.safe_load_all(render("kubernetes", "kubeadm-config.yaml.j2", **variables))
    return {doc["kind"]: doc for doc in docs}


def test_kubeadm_config_carries_cidrs_sans_and_the_kubelet_profile():
    docs = kubeadm_docs()
    init, cluster, kubelet = docs["InitConfiguration"], docs["ClusterConfiguration"], docs["KubeletConfiguration"]
    assert init["localAPIEndpoint"]["advertiseAddress"] == "192.168.100.1"
    assert cluster["networking"] == {"podSubnet": "10.244.0.0/16", "serviceSubnet": "10.96.0.0/12"}
    assert cluster["imageRepository"] == "registry.k8s.io"
    # The node IP (a pair's CX-7 link), the host name, the address the controller uses, the extra SANs.
    assert cluster["apiServer"]["certSANs"] == ["192.168.100.1", "spark-1", "192.0.2.11", "spark.example"]
    assert kubelet["apiVersion"] == "kubelet.config.k8s.io/v1beta1"
    assert (kubelet["cgroupDriver"], kubelet["failCgroupV1"], kubelet["reservedSystemCPUs"]) == ("systemd", True, "2,7")
    assert "ignorePreflightErrors" not in init["nodeRegistration"]
    assert "KubeProxyConfiguration" not in docs


def test_first_node_is_registered_without_the_control_plane_taint_whatever_the_cluster_size():
    """The pair bug: spark-01 kept its NoSchedule taint when a second Spark was in the group."""
    assert kubeadm_docs()["InitConfiguration"]["nodeRegistration"]["taints"] == []
    tainted = kubeadm_docs(kubernetes_untaint_control_plane=False)["InitConfiguration"]["nodeRegistration"]
    assert "taints" not in tainted  # kubeadm's default: the control-plane NoSchedule taint


def test_lab_settings_render_named_preflight_exceptions_and_kube_proxy_config():
    docs = kubeadm_docs(
        kubernetes_ignore_preflight_errors=["SystemVerification"],
        kubernetes_kube_proxy_config={"conntrack": {"maxPerCore": 0}},
        kubernetes_image_repository="registry.site.local/k8s",
    )
    assert docs["InitConfiguration"]["nodeRegistration"]["ignorePreflightErrors"] == ["SystemVerification"]
    assert docs["KubeProxyConfiguration"]["conntrack"] == {"maxPerCore": 0}
    assert docs["ClusterConfiguration"]["imageRepository"] == "registry.site.local/k8s"


def test_spark_kubelet_profile_sized_for_128_gb_unified_memory():
    config = kubelet_configuration(SPARK_PROFILE["spark"], reserved_system_cpus="0-1")
    assert config["systemReserved"]["memory"] == "8Gi" and config["kubeReserved"]["memory"] == "2Gi"
    assert config["evictionHard"]["memory.available"] == "4Gi"
    assert (config["cpuManagerPolicy"], config["reservedSystemCPUs"]) == ("static", "0-1")
    assert config["topologyManagerPolicy"] == "single-numa-node"
    # CPU reservations come from reservedSystemCPUs alone (the kubelet ignores systemReserved cpu then).
    assert "cpu" not in config["systemReserved"] and "cpu" not in config["kubeReserved"]


def test_join_configuration_carries_the_node_ip_and_the_token():
    text = render(
        "kubernetes",
        "kubeadm-join.yaml.j2",
        inventory_hostname="spark-2",
        kubernetes_cri_socket="unix:///run/containerd/containerd.sock",
        kubernetes_node_ip="192.168.100.2",
        kubernetes_ignore_preflight_errors=[],
        kubernetes_join_discovery={
            "apiServerEndpoint": "192.168.100.1:6443",
            "token": "abcdef.0123456789abcdef",
            "caCertHashes": ["sha256:" + "ab" * 32],
        },
    )
    join = yaml.safe_load(text)
    assert join["kind"] == "JoinConfiguration"
    assert join["discovery"]["bootstrapToken"]["apiServerEndpoint"] == "192.168.100.1:6443"
    assert join["nodeRegistration"]["kubeletExtraArgs"] == [{"name": "node-ip", "value": "192.168.100.2"}]
    assert join["nodeRegistration"]["name"] == "spark-2"


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
    "containerd_restrict_oom_score_adj": False,
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
    values = yaml.safe_load(
        render("cni", "cilium-values.yaml.j2", cni_pod_cidr="10.244.0.0/16", cni_mtu=mtu, cni_node_interface="")
    )
    assert "devices" not in values, "no pinned interface: Cilium detects its devices"
    assert values["ipam"] == {"mode": "cluster-pool", "operator": {"clusterPoolIPv4PodCIDRList": ["10.244.0.0/16"]}}
    assert values.get("MTU") == (mtu or None)


@pytest.mark.parametrize(
    ("template", "pinned"),
    [
        ("cilium-values.yaml.j2", lambda doc: doc["devices"]),
        ("calico-installation.yaml.j2", lambda doc: doc["spec"]["calicoNetwork"]["nodeAddressAutodetectionV4"]),
    ],
)
def test_a_pair_pins_node_addresses_to_the_link_interface(template, pinned):
    doc = yaml.safe_load(
        render("cni", template, cni_pod_cidr="10.244.0.0/16", cni_mtu=0, cni_node_interface="enp1s0f0np0")
    )
    assert pinned(doc) in (["enp1s0f0np0"], {"interface": "^enp1s0f0np0$"})


def test_calico_detects_node_addresses_itself_without_a_link():
    doc = yaml.safe_load(
        render("cni", "calico-installation.yaml.j2", cni_pod_cidr="10.244.0.0/16", cni_mtu=0, cni_node_interface="")
    )
    assert "nodeAddressAutodetectionV4" not in doc["spec"]["calicoNetwork"]


def bridge_vars(**overrides):
    return {
        "cni_bridge_name": "cni0",
        "cni_mtu": 0,
        "cni_node_mtu": {"stdout": "9000"},
        "cni_node_pod_cidr": "10.244.1.0/24",
        "cni_pod_cidr": "10.244.0.0/16",
        "cni_route_protocol": 233,
        "cni_pod_routes": [{"name": "spark-01", "pod_cidr": "10.244.0.0/24", "node_ip": "192.168.100.1"}],
        **overrides,
    }


def test_bridge_network_uses_the_node_subnet_and_link_mtu():
    import json

    conf = json.loads(render("cni", "bridge.conflist.j2", **bridge_vars()))
    bridge = conf["plugins"][0]
    assert (bridge["type"], bridge["mtu"], bridge["ipMasq"]) == ("bridge", 9000, False)
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.244.1.0/24"}]]
    assert [p["type"] for p in conf["plugins"]] == ["bridge", "portmap", "firewall"]
    assert json.loads(render("cni", "bridge.conflist.j2", **bridge_vars(cni_mtu=1500)))["plugins"][0]["mtu"] == 1500


def test_pod_network_script_routes_to_the_peer_and_masquerades_egress():
    script = render("cni", "tokenfactory-pod-network.sh.j2", **bridge_vars())
    assert 'ip route replace 10.244.0.0/24 via 192.168.100.1 proto "$PROTO"  # spark-01' in script
    assert "PROTO=233" in script
    assert "-s 10.244.0.0/16 ! -d 10.244.0.0/16" in script
    assert "ip route replace" not in render("cni", "tokenfactory-pod-network.sh.j2", **bridge_vars(cni_pod_routes=[]))
