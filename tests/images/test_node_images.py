"""The production path of the gateway image without a registry, on a real node: playbooks/cluster.yml's image play
puts the gateway image (gateway_image_source=archive, as built by scripts/build-service-images) next to the node
images into the node's containerd, where the kubelet's CRI finds it under its ref and digest; a second run loads
nothing. The node is a podman systemd host reached over SSH (molecule/shared/tasks/podman_hosts.yml) with the
containerd role applied for real."""

import json
import os
import pathlib
import subprocess
import uuid

import pytest

from tests.playbooks.ansible_run import ROOT, play_recap, run_playbook
from tests.playbooks.lab_node_inventory import write_lab_node_inventory

pytestmark = [pytest.mark.molecule, pytest.mark.slow, pytest.mark.timeout(1800)]
CACHE = pathlib.Path(os.environ.get("TF_CACHE", pathlib.Path.home() / ".cache/tokenfactory"))
GATEWAY = "localhost/tokenfactory-gateway:0.1.0"


def changed(stdout, host):
    return play_recap(stdout)[host]["changed"]


@pytest.fixture
def node(tmp_path):
    """One kubelet-capable podman host over SSH; removed afterwards."""
    name = f"tf-images-node-{uuid.uuid4().hex[:6]}"
    hosts = [{"name": name, "image": "localhost/tf-node:bookworm", "kubelet": True}]
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "tasks": [
                {
                    "ansible.builtin.include_tasks": str(ROOT / "molecule/shared/tasks/podman_hosts.yml"),
                    "vars": {
                        "tf_podman_hosts": hosts,
                        "tf_podman_ssh_key": str(tmp_path / "id_ed25519"),
                        "tf_podman_owner": "tf-images-test",
                    },
                },
                {
                    "ansible.builtin.copy": {
                        "content": "{{ tf_podman_addresses | to_json }}",
                        "dest": str(tmp_path / "addresses.json"),
                        "mode": "0600",
                    }
                },
            ],
        }
    ]
    (tmp_path / "create.yml").write_text(json.dumps(play))
    run_playbook(tmp_path / "create.yml", "-i", "localhost,", "-c", "local", timeout=600)
    address = json.loads((tmp_path / "addresses.json").read_text())[name]
    yield name, address, tmp_path / "id_ed25519"
    absent = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "tasks": [
                {
                    "ansible.builtin.include_tasks": str(ROOT / "molecule/shared/tasks/podman_hosts_absent.yml"),
                    "vars": {"tf_podman_hosts": hosts},
                }
            ],
        }
    ]
    (tmp_path / "absent.yml").write_text(json.dumps(absent))
    run_playbook(tmp_path / "absent.yml", "-i", "localhost,", "-c", "local", check=False)


def test_the_gateway_archive_reaches_the_nodes_containerd_once(node, tmp_path):
    name, address, key = node
    subprocess.run([ROOT / "scripts/build-service-images", "gateway"], check=True, timeout=3000)
    entry = next(e for e in json.loads((CACHE / "images/images.json").read_text()) if e["ref"] == GATEWAY)
    groups = {
        # Only the gateway image here (host var: wins over tf_lab_nodes' node image list).
        "spark_nodes": {"hosts": {name: {"ansible_host": address, "containerd_images": []}}},
        "tf_lab_nodes": {"hosts": {name: {}}},
    }
    write_lab_node_inventory(
        tmp_path / "inventory", groups, key, gateway_image_source="archive", gateway_image_archive=entry["archive"]
    )
    args = ["-i", tmp_path / "inventory", "--tags", "containerd,images"]
    first = run_playbook(ROOT / "playbooks/cluster.yml", *args, timeout=1500)
    assert changed(first.stdout, name) > 0
    listed = subprocess.run(
        ["podman", "exec", name, "ctr", "-n", "k8s.io", "images", "ls"], capture_output=True, text=True, check=True
    ).stdout
    (line,) = [row for row in listed.splitlines() if row.startswith(GATEWAY + " ")]
    assert entry["digest"] in line, line
    second = run_playbook(ROOT / "playbooks/cluster.yml", *args, timeout=1500)
    assert changed(second.stdout, name) == 0, second.stdout[-4000:]
