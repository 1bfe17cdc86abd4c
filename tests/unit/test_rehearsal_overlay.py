"""The rehearsals of the shipped inventories/spark-single and spark-pair (tests/rehearsal) override only what is
allowed: what a user edits (addresses, user, SSH), the vault file (written from vault.yml.example by the test), and
the simulation layer, each variable in the file of its category. A new override must be added here, in the open."""

import pathlib

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
REHEARSED = ["spark-single", "spark-pair"]

ALLOWED = {
    # What the user edits.
    "spark_nodes/connection.yml": {"ansible_user", "ansible_ssh_private_key_file", "ansible_ssh_common_args"},
    # The podman Spark host itself, read by lab/hosts.yml and lab/clean.yml only (never by the product).
    "all/rehearsal_hosts.yml": {
        "tf_lab_root",
        "tf_lab_ssh_key",
        "tf_lab_reports",
        "tf_lab_node_image",
        "tf_lab_paired",
        "tf_lab_podman_networks",
        "tf_lab_cache",
    },
    # SIMULATED GPU, driver and GPU Operator; an x86-64 host; vLLM's CPU build.
    "all/simulated_hardware.yml": {
        "preflight_profile",
        "gpu_operator_install",
        "tf_engine_image",
        "tf_engine_version",
        "tf_engine_extra_args",
        "tf_engine_env",
        "tf_engine_resources",
        "tf_slo_ttft_p95_ms",
    },
    "spark_nodes/simulated_hardware.yml": {
        "tf_simulated_gpu",
        "tf_lab_simulated_gpu",
        "tf_lab_simulated_dcgm_exporter",
        "containerd_cdi",
        "kubernetes_kubelet_profile",
    },
    # SIMULATED public internet: the stand-in hub's tiny model, images and binaries from the cache.
    "all/simulated_internet.yml": {
        "tf_lab_hub_host",
        "tf_lab_hub_port",
        "tf_lab_hub_root",
        "tf_provider_url",
        "tf_context_length",
        "tf_lab_service_images",
        "tf_lab_extra_images",
        "gateway_image_source",
        "gateway_image_archive",
        "gateway_postgres_image",
        "gateway_redis_image",
        "observability_prometheus_image",
        "observability_node_exporter_image",
        "observability_grafana_enabled",
        "cni_plugin",
    },
    "spark_nodes/simulated_internet.yml": {
        "host_prep_apt_update_cache",
        "tf_lab_k8s_dir",
        "kubernetes_install_method",
        "kubernetes_binary_src_dir",
        "cni_plugins_src_dir",
        "containerd_images_src_dir",
        "containerd_images",
    },
    # This 2-CPU cgroup-v1 VM.
    "all/test_machine.yml": {"gateway_resources"},
    "spark_nodes/test_machine.yml": {
        "ansible_python_interpreter",
        "preflight_min_disk_gb",
        "preflight_require_time_sync",
        "preflight_require_cgroup_v2",
        "preflight_cgroup_driver",
        "containerd_systemd_cgroup",
        "containerd_restrict_oom_score_adj",
        "kubernetes_cgroup_driver",
        "kubernetes_kubelet_fail_cgroup_v1",
        "kubernetes_ignore_preflight_errors",
        "kubernetes_kube_proxy_config",
        "kubernetes_kubelet_reserved_cpu_count",
        "kubernetes_kubelet_config_overrides",
    },
}
# The pair's SIMULATED ConnectX-7 cable (an internal podman network) and the netdev it shows inside the hosts; the
# pair's overlay links every other file of the single's.
ALLOWED_PAIR = {**ALLOWED, "all/simulated_link.yml": {"tf_lab_link", "connectx_interface"}}


def overlay_vars(overlay):
    return {
        str(path.relative_to(overlay / "group_vars")): set(yaml.safe_load(path.read_text()) or {})
        for path in sorted((overlay / "group_vars").rglob("*.yml"))
    }


@pytest.fixture(params=REHEARSED)
def rehearsed(request):
    return ROOT / "inventories" / request.param, ROOT / "tests/rehearsal" / request.param


def test_the_overlay_sets_exactly_the_allowed_variables(rehearsed):
    shipped, overlay = rehearsed
    assert overlay_vars(overlay) == (ALLOWED_PAIR if shipped.name == "spark-pair" else ALLOWED)


def test_the_pair_overlay_shares_every_file_of_the_single_overlay_but_its_link():
    single, pair = (ROOT / "tests/rehearsal" / name / "group_vars" for name in REHEARSED)
    for path in pair.rglob("*.yml"):
        rel = path.relative_to(pair)
        if str(rel) in ALLOWED_PAIR.keys() - ALLOWED.keys():
            assert not path.is_symlink(), rel
        else:
            assert path.is_symlink() and path.resolve() == (single / rel).resolve(), rel


def test_the_overlay_hosts_file_only_gives_the_shipped_hosts_an_address(rehearsed):
    shipped, overlay = rehearsed

    def hosts(node, found):
        for name, values in (node.get("hosts") or {}).items():
            found[name] = set(values or {})
        for child in (node.get("children") or {}).values():
            hosts(child or {}, found)
        return found

    shipped_hosts = hosts(yaml.safe_load((shipped / "hosts.yml").read_text())["all"], {})
    overlay_hosts = hosts(yaml.safe_load((overlay / "hosts.yml").read_text())["all"], {})
    assert set(overlay_hosts) == set(shipped_hosts) - {"localhost"}, overlay_hosts
    assert all(values == {"ansible_host"} for values in overlay_hosts.values()), overlay_hosts
    assert not (overlay / "host_vars").exists()


def test_the_vault_is_not_committed_in_the_overlay(rehearsed):
    assert not (rehearsed[1] / "group_vars/all/vault.yml").exists()
