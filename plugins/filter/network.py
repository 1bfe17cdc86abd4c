# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Address planning for Kubernetes CIDRs and the ConnectX-7 link between a DGX Spark pair (netaddr)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

try:
    import netaddr
except ImportError:  # reported when a filter is used, not when Ansible loads plugins
    netaddr = None


def _require_netaddr():
    if netaddr is None:
        raise AnsibleFilterError(
            "tokenfactory.spark network filters need the netaddr Python library (requirements.txt)"
        )


def checked_cidr(value, field="CIDR"):
    """Normalised network CIDR; errors name the variable and show the offending value."""
    _require_netaddr()
    try:
        network = netaddr.IPNetwork(str(value))
    except (netaddr.AddrFormatError, ValueError, TypeError) as exc:
        raise AnsibleFilterError(f"{field}={value!r} is not a CIDR (expected e.g. 10.244.0.0/16)") from exc
    if "/" not in str(value):
        raise AnsibleFilterError(f"{field}={value!r} needs a prefix length (expected e.g. 10.244.0.0/16)")
    if network.ip != network.network:
        raise AnsibleFilterError(f"{field}={value!r} has host bits set; did you mean {network.cidr}?")
    return str(network.cidr)


def valid_ip(value):
    _require_netaddr()
    return netaddr.valid_ipv4(str(value)) or netaddr.valid_ipv6(str(value))


def cidrs_overlap(first, second):
    _require_netaddr()
    return netaddr.IPNetwork(str(first)) in netaddr.IPNetwork(str(second)) or netaddr.IPNetwork(
        str(second)
    ) in netaddr.IPNetwork(str(first))


def link_address(cidr, index, field="link CIDR"):
    _require_netaddr()
    network = netaddr.IPNetwork(checked_cidr(cidr, field))
    point_to_point = network.size == 2  # /31 or /127
    first = network.first if point_to_point else network.first + 1
    last = network.last if point_to_point or network.version == 6 else network.last - 1
    position = int(index)
    if position < 0 or first + position > last:
        raise AnsibleFilterError(f"{field}={cidr} has no usable address for node index {position}")
    return f"{netaddr.IPAddress(first + position, network.version)}/{network.prefixlen}"


def connectx_port_netdev(ports, physical_port=0, field="connectx_physical_port"):
    """The netdev of ConnectX-7 physical port N (PCI function N) in the lowest PCI domain.

    DGX Spark shows each QSFP cage as two PCIe functions in two domains (enp1s0f0np0 and enP2p1s0f0np0);
    picking by PCI function and lowest domain names the same cage on both nodes of a pair.
    """
    candidates = sorted(
        (p for p in ports if p.get("connectx7") and p["pci_address"].rsplit(".", 1)[-1] == str(physical_port)),
        key=lambda p: p["pci_address"],
    )
    if not candidates:
        seen = ", ".join(f"{p['netdev']} ({p['pci_address']})" for p in ports if p.get("connectx7")) or "none"
        raise AnsibleFilterError(
            f"{field}={physical_port}: no ConnectX-7 interface on that port; CX-7 ports seen: {seen}"
        )
    return candidates[0]["netdev"]


def cni_bridge_nodes(nodes, pod_cidr):
    """Node objects -> [{name, pod_cidr, node_ip}], sorted by name; every podCIDR must lie in `pod_cidr`."""
    _require_netaddr()
    network = netaddr.IPNetwork(checked_cidr(pod_cidr, "cni_pod_cidr"))
    planned = []
    for node in nodes or []:
        name = (node.get("metadata") or {}).get("name")
        subnet = (node.get("spec") or {}).get("podCIDR")
        addresses = (node.get("status") or {}).get("addresses") or []
        internal = [a["address"] for a in addresses if a.get("type") == "InternalIP" and ":" not in a["address"]]
        if not subnet:
            raise AnsibleFilterError(
                f"node {name} has no spec.podCIDR (is the controller-manager allocating node CIDRs?)"
            )
        if not internal:
            raise AnsibleFilterError(f"node {name} reports no IPv4 InternalIP")
        if netaddr.IPNetwork(subnet) not in network:
            raise AnsibleFilterError(f"node {name} has podCIDR {subnet}, outside the pod network {network}")
        planned.append({"name": name, "pod_cidr": subnet, "node_ip": internal[0]})
    return sorted(planned, key=lambda n: n["name"])


class FilterModule:
    def filters(self):
        return {
            "checked_cidr": checked_cidr,
            "cidrs_overlap": cidrs_overlap,
            "valid_ip": valid_ip,
            "link_address": link_address,
            "connectx_port_netdev": connectx_port_netdev,
            "cni_bridge_nodes": cni_bridge_nodes,
        }
