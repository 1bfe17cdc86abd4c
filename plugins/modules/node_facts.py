#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: node_facts
short_description: GPU, unified memory, CPU, ConnectX-7 and DGX OS facts of a GPU node
version_added: 0.1.0
description:
  - Runs C(nvidia-smi --query-gpu=...) and plain C(nvidia-smi) (for the CUDA version) and parses both.
  - Reads total memory from C(/proc/meminfo); on GB10 (DGX Spark) this is the GPU's memory as well,
    because C(nvidia-smi) reports its memory as C(Not Supported).
  - Maps RDMA devices to network interfaces from sysfs (what C(ibdev2netdev) prints) and flags ConnectX-7 ports.
  - Reads C(/etc/dgx-release) when present.
  - Never fails because a GPU is missing; it reports C(gpu.state) and the preflight role decides.
author:
  - Token Factory maintainers (@tokenfactory)
options:
  nvidia_smi:
    description: Name or path of the nvidia-smi binary.
    type: str
    default: nvidia-smi
  sysfs_root:
    description: Root of sysfs (tests point it at a recorded tree).
    type: path
    default: /sys
  meminfo_path:
    description: File to read MemTotal from.
    type: path
    default: /proc/meminfo
  dgx_release_path:
    description: DGX OS release file.
    type: path
    default: /etc/dgx-release
attributes:
  check_mode:
    description: Only reads; runs the same in check mode.
    support: full
  diff_mode:
    description: Changes nothing, so there is nothing to diff.
    support: none
"""

EXAMPLES = r"""
- name: Gather node facts
  tokenfactory.spark.node_facts:

- name: Show the GPU product
  ansible.builtin.debug:
    msg: >-
      {{ ansible_facts.tf_node.gpu.product }}
      ({{ ansible_facts.tf_node.gpu.compute_capability | tokenfactory.spark.compute_capability_to_sm }})
"""

RETURN = r"""
ansible_facts:
  description: Facts under C(tf_node).
  returned: always
  type: dict
  contains:
    tf_node:
      description: Node facts.
      type: dict
      sample:
        gpu:
          state: ok
          count: 1
          product: NVIDIA-GB10
          family: blackwell
          compute_capability: "12.1"
          driver_version: 580.95.05
          cuda_version: "13.0"
          memory_bytes: 128526278656
          unified_memory: true
          devices: []
        memory_bytes: 128526278656
        cpu_cores: 20
        connectx: []
        connectx7: []
        dgx_release: {}
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.tokenfactory.spark.plugins.module_utils.host import node_info


def gpu_facts(module, memory_bytes):
    binary = module.get_bin_path(module.params["nvidia_smi"])
    if binary is None:
        return {"state": "no_driver", "detail": f"{module.params['nvidia_smi']} not found", "count": 0}
    rc, out, err = module.run_command([binary, *node_info.GPU_QUERY_ARGS])
    if rc != 0:
        detail = (out + err).strip()
        return {"state": node_info.classify_failure(rc, detail), "detail": detail, "count": 0}
    try:
        devices = node_info.parse_gpu_query(out)
        rc, banner, err = module.run_command([binary])
        versions = node_info.parse_smi_header(banner if rc == 0 else "")
    except node_info.NvidiaSmiError as exc:
        return {"state": exc.reason, "detail": exc.detail, "count": 0}
    first = devices[0]
    unified = first["memory_mib"] is None
    return {
        "state": "ok",
        "count": len(devices),
        "product": first["product"],
        "family": first["family"],
        "compute_capability": first["compute_capability"],
        "driver_version": versions["driver_version"],
        "cuda_version": versions["cuda_version"],
        "unified_memory": unified,
        "memory_bytes": memory_bytes if unified else first["memory_mib"] * 1024 * 1024,
        "devices": devices,
    }


def read_text(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return None


def main():
    module = AnsibleModule(
        argument_spec={
            "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
            "sysfs_root": {"type": "path", "default": "/sys"},
            "meminfo_path": {"type": "path", "default": "/proc/meminfo"},
            "dgx_release_path": {"type": "path", "default": "/etc/dgx-release"},
        },
        supports_check_mode=True,
    )
    meminfo = read_text(module.params["meminfo_path"])
    if meminfo is None:
        module.fail_json(msg=f"cannot read {module.params['meminfo_path']}")
    memory_bytes = node_info.meminfo_total_bytes(meminfo)
    ports = node_info.rdma_netdevs(module.params["sysfs_root"])
    release = read_text(module.params["dgx_release_path"])
    facts = {
        "gpu": gpu_facts(module, memory_bytes),
        "memory_bytes": memory_bytes,
        "cpu_cores": os.cpu_count(),
        "connectx": ports,
        "connectx7": [p for p in ports if p["connectx7"]],
        "dgx_release": node_info.parse_release_file(release) if release else {},
    }
    module.exit_json(changed=False, ansible_facts={"tf_node": facts})


if __name__ == "__main__":
    main()
