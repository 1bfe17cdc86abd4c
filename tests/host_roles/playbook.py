"""Apply one role of this collection with ansible-playbook (podman hosts, or the controller itself)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import tempfile

from tests.playbooks import ansible_run

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run_role(target, role, extra_vars=None, check=False, connection="containers.podman.podman"):
    """ansible-playbook applying `role` to the inventory host `target`; returns the CompletedProcess."""
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
            f"{target},",
            "-c",
            connection,
            "-e",
            f"@{vars_file}",
            str(playbook),
        ]
        if check:
            argv.append("--check")
        return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, check=False)


def changed_count(result) -> int:
    """Sum of changed= over the PLAY RECAP lines (fails when there is no recap: the run did not finish)."""
    return ansible_run.changed_count(result.stdout, result.stderr)
