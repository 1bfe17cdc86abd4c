# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Pure parsers for host facts: nvidia-smi output, /proc/meminfo, release files, RDMA sysfs.

Kept free of AnsibleModule so unit tests feed them recorded outputs directly.
"""

from __future__ import annotations

import os
import re

GPU_QUERY_FIELDS = ("index", "name", "uuid", "pci.bus_id", "driver_version", "compute_cap", "memory.total")
GPU_QUERY_ARGS = ["--query-gpu=" + ",".join(GPU_QUERY_FIELDS), "--format=csv,noheader,nounits"]
NOT_SUPPORTED = {"[n/a]", "n/a", "[not supported]", "not supported", ""}
# PCI device ids of ConnectX-7 functions (mlx5); 0x101e is the CX-7 virtual function.
CONNECTX7_DEVICE_IDS = {"0x1021", "0x101e"}
# Compute capability major -> family, the way GPU feature discovery names it.
GPU_FAMILIES = {7: "volta", 8: "ampere", 9: "hopper", 10: "blackwell", 12: "blackwell"}


class NvidiaSmiError(Exception):
    """nvidia-smi ran but reported no usable GPU; .reason is no_driver, no_devices or unparsable."""

    def __init__(self, reason, detail):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def classify_failure(rc, text):
    """Map a failed nvidia-smi run to a reason (no_driver / no_devices / failed)."""
    lowered = text.lower()
    if "no devices were found" in lowered or rc == 6:
        return "no_devices"
    if "couldn't communicate with the nvidia driver" in lowered or rc == 9:
        return "no_driver"
    return "failed"


def parse_gpu_query(text):
    """Rows of `nvidia-smi --query-gpu=<GPU_QUERY_FIELDS> --format=csv,noheader,nounits` -> list of dicts."""
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(GPU_QUERY_FIELDS):
            raise NvidiaSmiError("unparsable", f"expected {len(GPU_QUERY_FIELDS)} fields, got {line!r}")
        row = dict(zip(GPU_QUERY_FIELDS, cells, strict=True))
        memory = row["memory.total"]
        gpus.append(
            {
                "index": int(row["index"]),
                "name": row["name"],
                "product": product_label(row["name"]),
                "uuid": row["uuid"],
                "pci_bus_id": row["pci.bus_id"],
                "driver_version": row["driver_version"],
                "compute_capability": row["compute_cap"],
                "family": gpu_family(row["compute_cap"]),
                "memory_mib": None if memory.lower() in NOT_SUPPORTED else int(float(memory)),
            }
        )
    if not gpus:
        raise NvidiaSmiError("no_devices", "nvidia-smi listed no GPU")
    return gpus


def parse_smi_header(text):
    """Driver and CUDA version from the banner of plain `nvidia-smi`."""
    driver = re.search(r"Driver Version:\s*([0-9.]+)", text)
    cuda = re.search(r"CUDA Version:\s*([0-9.]+)", text)
    if not driver or not cuda:
        raise NvidiaSmiError("unparsable", "no 'Driver Version'/'CUDA Version' in the nvidia-smi banner")
    return {"driver_version": driver.group(1), "cuda_version": cuda.group(1)}


def product_label(name):
    """'NVIDIA GB10' -> 'NVIDIA-GB10' (the nvidia.com/gpu.product label form)."""
    return re.sub(r"\s+", "-", name.strip())


def gpu_family(compute_cap):
    major, _dot, minor = str(compute_cap).partition(".")
    if major == "8" and minor == "9":
        return "ada-lovelace"
    try:
        return GPU_FAMILIES.get(int(major), "unknown")
    except ValueError:
        return "unknown"


def meminfo_total_bytes(text):
    """MemTotal from /proc/meminfo in bytes (GB10's GPU memory is this unified pool)."""
    match = re.search(r"^MemTotal:\s+(\d+)\s*kB", text, re.MULTILINE)
    if not match:
        raise ValueError("no MemTotal line in meminfo")
    return int(match.group(1)) * 1024


def parse_release_file(text):
    """KEY=VALUE lines (os-release, /etc/dgx-release) -> dict, quotes stripped, later keys win."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key and not key.startswith("#"):
            values[key.strip()] = value.strip().strip("\"'")
    return values


def _read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return None


def rdma_netdevs(sysfs_root="/sys"):
    """The `ibdev2netdev` mapping from sysfs: one dict per (RDMA device, port, netdev)."""
    base = os.path.join(sysfs_root, "class", "infiniband")
    found = []
    for ibdev in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        device = os.path.join(base, ibdev, "device")
        net_dir = os.path.join(device, "net")
        pci_id = _read(os.path.join(device, "device"))
        pci_address = os.path.basename(os.path.realpath(device))
        for netdev in sorted(os.listdir(net_dir)) if os.path.isdir(net_dir) else []:
            port_text = _read(os.path.join(net_dir, netdev, "dev_port")) or "0"
            found.append(
                {
                    "ibdev": ibdev,
                    "port": int(port_text) + 1,
                    "netdev": netdev,
                    "pci_address": pci_address,
                    "pci_device_id": pci_id,
                    "connectx7": pci_id in CONNECTX7_DEVICE_IDS,
                    "operstate": _read(os.path.join(net_dir, netdev, "operstate")) or "unknown",
                }
            )
    return found
