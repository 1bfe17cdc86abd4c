"""Real systemd hosts in podman (from scripts/build-host-image) and ansible-playbook runs against them."""

from __future__ import annotations

import os
import subprocess
import uuid

from tests.host_roles import playbook

ROOT = playbook.ROOT
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
    """ansible-playbook applying one role of this collection to the podman host."""
    return playbook.run_role(host.name, role, extra_vars, check=check)
