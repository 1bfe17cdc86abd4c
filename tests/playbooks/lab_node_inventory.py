"""Inventories for tests that bring up their own podman kubelet hosts (molecule/shared/tasks/podman_hosts.yml)."""

import yaml

from tests.playbooks.ansible_run import ROOT

CONTROLLER = {
    "hosts": {
        "localhost": {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}
    }
}


def write_lab_node_inventory(directory, groups, key, **variables):
    """directory/hosts.yml: the controller plus `groups`, reached over SSH as root with `key`, and `variables`; the
    LAB ONLY settings of podman kubelet hosts (cgroupfs, restrict_oom_score_adj, ...) linked in as group
    tf_lab_nodes' group_vars, as the lab uses them."""
    inventory = {
        "all": {
            "children": {"controller": CONTROLLER, **groups},
            "vars": {
                "ansible_user": "root",
                "ansible_ssh_private_key_file": str(key),
                "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
                **variables,
            },
        }
    }
    (directory / "group_vars").mkdir(parents=True)
    (directory / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (directory / "group_vars/tf_lab_nodes").symlink_to(ROOT / "inventories/lab/group_vars/tf_lab_nodes")
