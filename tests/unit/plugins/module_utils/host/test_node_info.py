"""nvidia-smi / meminfo / sysfs parsing on outputs in nvidia-smi's format (no GPU on these machines)."""

import pathlib

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.host import node_info

FIXTURES = pathlib.Path(__file__).parents[3] / "fixtures" / "nvidia-smi"


def recorded(case, name):
    return (FIXTURES / case / name).read_text()


def test_gb10_query_reports_unified_memory_and_sm121_capability():
    (gpu,) = node_info.parse_gpu_query(recorded("gb10", "query.csv"))
    assert gpu["product"] == "NVIDIA-GB10"
    assert gpu["family"] == "blackwell"
    assert gpu["compute_capability"] == "12.1"
    assert gpu["memory_mib"] is None
    assert gpu["pci_bus_id"] == "0000000F:01:00.0"


def test_gb10_banner_versions():
    assert node_info.parse_smi_header(recorded("gb10", "table.txt")) == {
        "driver_version": "580.95.05",
        "cuda_version": "13.0",
    }


def test_h100_query_lists_eight_hopper_gpus_with_memory():
    gpus = node_info.parse_gpu_query(recorded("h100", "query.csv"))
    assert [g["index"] for g in gpus] == list(range(8))
    assert {g["product"] for g in gpus} == {"NVIDIA-H100-80GB-HBM3"}
    assert {g["family"] for g in gpus} == {"hopper"}
    assert gpus[0]["memory_mib"] == 81559
    assert node_info.parse_smi_header(recorded("h100", "table.txt"))["cuda_version"] == "12.4"


@pytest.mark.parametrize(("case", "reason"), [("no-driver", "no_driver"), ("no-devices", "no_devices")])
def test_failed_runs_are_classified(case, reason):
    rc = int(recorded(case, "rc"))
    assert node_info.classify_failure(rc, recorded(case, "query.csv")) == reason


def test_unknown_failure_is_not_mistaken_for_missing_gpu():
    assert node_info.classify_failure(1, "Unable to determine the device handle for GPU0: Unknown Error") == "failed"


def test_wrong_field_count_is_unparsable():
    with pytest.raises(node_info.NvidiaSmiError) as err:
        node_info.parse_gpu_query("0, NVIDIA GB10, 580.95.05\n")
    assert err.value.reason == "unparsable"


def test_empty_query_means_no_devices():
    with pytest.raises(node_info.NvidiaSmiError) as err:
        node_info.parse_gpu_query("\n")
    assert err.value.reason == "no_devices"


def test_banner_without_versions_is_unparsable():
    with pytest.raises(node_info.NvidiaSmiError):
        node_info.parse_smi_header(recorded("no-driver", "table.txt"))


@pytest.mark.parametrize(
    ("cap", "family"), [("8.9", "ada-lovelace"), ("8.0", "ampere"), ("10.0", "blackwell"), ("x", "unknown")]
)
def test_families(cap, family):
    assert node_info.gpu_family(cap) == family


def test_meminfo_total_of_a_spark():
    text = "MemTotal:       125512732 kB\nMemFree:        119876532 kB\n"
    assert node_info.meminfo_total_bytes(text) == 125512732 * 1024


def test_meminfo_without_total_is_an_error():
    with pytest.raises(ValueError, match="MemTotal"):
        node_info.meminfo_total_bytes("MemFree: 1 kB\n")


def test_dgx_release_file():
    text = 'DGX_NAME="DGX Spark"\nDGX_PRETTY_NAME="NVIDIA DGX Spark"\nDGX_SWBUILD_VERSION="7.2.3"\n# comment\n'
    assert node_info.parse_release_file(text)["DGX_SWBUILD_VERSION"] == "7.2.3"


def make_port(root, ibdev, pci, device_id, netdev, dev_port, state="up"):
    """A sysfs tree shaped like the kernel's: class/infiniband/<dev>/device -> devices/<pci>."""
    pci_dir = root / "devices" / "pci0000:00" / pci
    (pci_dir / "net" / netdev).mkdir(parents=True, exist_ok=True)
    (pci_dir / "device").write_text(device_id + "\n")
    (pci_dir / "net" / netdev / "dev_port").write_text(f"{dev_port}\n")
    (pci_dir / "net" / netdev / "operstate").write_text(state + "\n")
    link = root / "class" / "infiniband" / ibdev
    link.mkdir(parents=True)
    (link / "device").symlink_to(pci_dir)


def test_rdma_netdevs_maps_ibdev_to_netdev_and_flags_cx7(tmp_path):
    make_port(tmp_path, "rocep1s0f0", "0000:01:00.0", "0x1021", "enp1s0f0np0", 0)
    make_port(tmp_path, "rocep1s0f1", "0000:01:00.1", "0x1021", "enp1s0f1np1", 0, "down")
    make_port(tmp_path, "mlx5_9", "0000:05:00.0", "0x1017", "ens5f0", 0)
    ports = node_info.rdma_netdevs(str(tmp_path))
    assert [(p["ibdev"], p["port"], p["netdev"], p["connectx7"]) for p in ports] == [
        ("mlx5_9", 1, "ens5f0", False),
        ("rocep1s0f0", 1, "enp1s0f0np0", True),
        ("rocep1s0f1", 1, "enp1s0f1np1", True),
    ]
    assert ports[2]["operstate"] == "down"
    assert ports[1]["pci_address"] == "0000:01:00.0"


def test_rdma_netdevs_without_infiniband_class(tmp_path):
    assert node_info.rdma_netdevs(str(tmp_path)) == []
