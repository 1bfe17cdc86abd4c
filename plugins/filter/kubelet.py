# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""The kubelet's configuration: a profile assembled with the node's settings, and the CPUs it keeps for the system."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError


def cpuset(ids):
    """Sorted CPU ids -> cpuset notation with ranges (0,1,2,5 -> 0-2,5)."""
    parts, start = [], None
    for i, cpu in enumerate(ids):
        if start is None:
            start = cpu
        if i + 1 == len(ids) or ids[i + 1] != cpu + 1:
            parts.append(str(start) if start == cpu else f"{start}-{cpu}")
            start = None
    return ",".join(parts)


def kubelet_reserved_cpus(lines, count):
    if isinstance(lines, str):
        lines = lines.splitlines()
    cpus = []
    for line in lines:
        fields = str(line).split()
        if not fields:
            continue
        try:
            cpus.append((int(fields[1]) if len(fields) > 1 else 1024, int(fields[0])))
        except ValueError as exc:
            raise AnsibleFilterError(
                f"kubelet_reserved_cpus: expected '<cpu id> <capacity>' lines, got {line!r}"
            ) from exc
    count = int(count)
    if count < 1 or count >= len(cpus):
        raise AnsibleFilterError(
            f"kubelet_reserved_cpus: cannot reserve {count} of {len(cpus)} CPUs (at least one, and one left for pods)"
        )
    return cpuset(sorted(cpu for _capacity, cpu in sorted(cpus)[:count]))


def _merged(base, override):
    merged = dict(base)
    for key, value in (override or {}).items():
        merged[key] = (
            _merged(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict) else value
        )
    return merged


def kubelet_configuration(
    profile, cgroup_driver="systemd", fail_cgroup_v1=True, reserved_system_cpus="", overrides=None
):
    """KubeletConfiguration fields: node settings, then the profile, reservedSystemCPUs (static CPU manager only),
    then `overrides` merged recursively."""
    if cgroup_driver not in ("systemd", "cgroupfs"):
        raise AnsibleFilterError(
            f"kubelet_configuration: cgroup_driver must be systemd or cgroupfs, got {cgroup_driver!r}"
        )
    config = {"cgroupDriver": cgroup_driver, "failSwapOn": True, "failCgroupV1": bool(fail_cgroup_v1)}
    config = _merged(config, profile or {})
    if config.get("cpuManagerPolicy") == "static" and reserved_system_cpus:
        config["reservedSystemCPUs"] = str(reserved_system_cpus)
    return _merged(config, overrides)


class FilterModule:
    def filters(self):
        return {"kubelet_reserved_cpus": kubelet_reserved_cpus, "kubelet_configuration": kubelet_configuration}
