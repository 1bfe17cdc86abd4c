"""Real systemd hosts in podman (from scripts/build-host-image) and ansible-playbook runs against them."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import tempfile
import uuid

ROOT = pathlib.Path(__file__).resolve().parents[2]
IMAGE = "localhost/tf-debian:bookworm"
FIXTURES = ROOT / "tests" / "unit" / "fixtures" / "nvidia-smi"
SIMULATION = ROOT / "molecule" / "shared" / "files" / "nvidia-smi-simulation"


class PodmanHost:
    """A booted systemd container; `volumes` are podman -v specs."""

    def __init__(self, volumes=(), image=IMAGE):
        self.name = f"tf-test-{uuid.uuid4().hex[:8]}"
        self.volumes = volumes
        self.image = image

    def __enter__(self):
        args = ["podman", "run", "-d", "--name", self.name, "--hostname", self.name, "--systemd=always"]
        for spec in self.volumes:
            args += ["-v", spec]
        subprocess.run([*args, self.image, "/sbin/init"], check=True, capture_output=True)
        self.exec("systemctl", "is-system-running", "--wait", check=False)
        return self

    def __exit__(self, *exc):
        subprocess.run(["podman", "rm", "-f", self.name], check=False, capture_output=True)

    def exec(self, *argv, check=True):
        return subprocess.run(["podman", "exec", self.name, *argv], check=check, capture_output=True, text=True)

    def write(self, path, text, mode="0644"):
        self.exec("mkdir", "-p", os.path.dirname(path))
        subprocess.run(
            ["podman", "exec", "-i", self.name, "sh", "-c", f"cat > {path} && chmod {mode} {path}"],
            input=text,
            text=True,
            check=True,
        )

    def simulate_gpu(self, case):
        """Install the nvidia-smi SIMULATION replaying a recorded case (no GPU exists here)."""
        for name in ("query.csv", "table.txt", "rc"):
            self.write(f"/usr/local/share/nvidia-smi-simulation/{name}", (FIXTURES / case / name).read_text())
        self.write("/usr/local/bin/nvidia-smi", SIMULATION.read_text(), mode="0755")


def run_role(host, role, extra_vars=None, check=False):
    """ansible-playbook applying one role of this collection to the host; returns the CompletedProcess."""
    with tempfile.TemporaryDirectory() as tmp:
        playbook = pathlib.Path(tmp, "play.yml")
        playbook.write_text(f"- hosts: all\n  roles: [{{role: {role}}}]\n")
        vars_file = pathlib.Path(tmp, "vars.json")
        vars_file.write_text(json.dumps(extra_vars or {}))
        env = {
            **os.environ,
            "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
            "ANSIBLE_ROLES_PATH": str(ROOT / "roles"),
            "ANSIBLE_FORCE_COLOR": "0",
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_CALLBACK_RESULT_FORMAT": "json",
        }
        argv = [
            str(ROOT / ".venv" / "bin" / "ansible-playbook"),
            "-i",
            f"{host.name},",
            "-c",
            "containers.podman.podman",
            "-e",
            f"@{vars_file}",
            str(playbook),
        ]
        if check:
            argv.append("--check")
        return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
