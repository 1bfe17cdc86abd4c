"""Bad input on the way to a node's containerd: an image archive of another architecture than the node's fails before
anything is copied or imported, naming both architectures; a build for an unknown architecture fails before podman
runs. Real playbook runs on this machine (localhost as the node: its facts give the architecture)."""

import json
import os

from ansible_collections.tokenfactory.spark.plugins.module_utils.host.oci_archive import oci_architecture

from tests.oci_layout import Layout
from tests.playbooks.ansible_run import run_playbook

OTHER = {"amd64": "arm64", "arm64": "amd64"}


def image_play(tmp_path, **gateway_vars):
    play = [
        {
            "hosts": "localhost",
            "tasks": [
                {
                    "ansible.builtin.include_role": {"name": "tokenfactory.spark.gateway", "tasks_from": "image"},
                    "vars": gateway_vars,
                },
                {
                    "ansible.builtin.include_role": {"name": "tokenfactory.spark.containerd", "tasks_from": "images"},
                    "vars": {
                        "containerd_images": "{{ gateway_node_images }}",
                        "containerd_images_node_dir": str(tmp_path / "node-images"),
                        "containerd_ctr": str(tmp_path / "no-ctr-here"),
                    },
                },
            ],
        }
    ]
    (tmp_path / "play.yml").write_text(json.dumps(play))
    return run_playbook(tmp_path / "play.yml", "-i", "localhost,", "-c", "local", check=False, timeout=300)


def test_an_archive_of_another_architecture_fails_before_the_load_naming_both(tmp_path):
    here = oci_architecture(os.uname().machine)
    layout = Layout()
    archive = layout.write(tmp_path / "gateway.tar", [layout.image(OTHER[here])])
    run = image_play(tmp_path, gateway_image_source="archive", gateway_image_archive=str(archive))
    assert run.returncode != 0
    assert f"this node is {here} ({os.uname().machine})" in run.stdout, run.stdout[-3000:]
    assert f"localhost/tokenfactory-gateway:0.1.0 ({archive}) is {OTHER[here]}" in run.stdout
    assert "Nothing was loaded" in run.stdout
    assert "List the images containerd has" not in run.stdout  # failed before containerd was asked anything
    assert not (tmp_path / "node-images").exists()


def test_an_unknown_build_architecture_fails_before_podman(tmp_path):
    run = image_play(tmp_path, gateway_image_source="build", gateway_image_architecture="riscv64")
    assert run.returncode != 0
    assert "'riscv64' is not supported (one of aarch64, amd64, arm64, x86_64)" in run.stdout, run.stdout[-3000:]
    assert "build it with podman" not in run.stdout
