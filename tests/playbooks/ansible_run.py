"""Run ansible-playbook from tests the way a user does: project ansible.cfg, the venv's Python."""

import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent
RECAP_LINE = re.compile(
    r"^(?P<host>\S+)\s*:\s*ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)"
    r"\s+failed=(?P<failed>\d+)",
    re.MULTILINE,
)


def ansible_env(extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env["PATH"] = f"{BIN}:{env['PATH']}"
    env["ANSIBLE_CONFIG"] = str(ROOT / "ansible.cfg")
    env["ANSIBLE_PYTHON_INTERPRETER"] = sys.executable
    env.update(extra or {})
    return env


def run_playbook(playbook, *args, extra_env=None, check=True, timeout=600, cwd=ROOT):
    """Run ansible-playbook; return the CompletedProcess (asserting success unless check=False)."""
    cmd = [str(BIN / "ansible-playbook"), str(playbook), *map(str, args)]
    proc = subprocess.run(
        cmd, cwd=cwd, env=ansible_env(extra_env), capture_output=True, text=True, timeout=timeout, check=False
    )
    if check:
        assert proc.returncode == 0, (
            f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


def play_recap(stdout: str, stderr: str = "") -> dict[str, dict[str, int]]:
    """host -> {ok, changed, unreachable, failed} of the last PLAY RECAP; fails when there is none (the run did
    not finish)."""
    hosts = {
        m["host"]: {field: int(value) for field, value in m.groupdict().items() if field != "host"}
        for m in RECAP_LINE.finditer(stdout.rpartition("PLAY RECAP")[2])
    }
    assert hosts, f"no PLAY RECAP in the output:\n{stdout[-3000:]}\n{stderr[-2000:]}"
    return hosts


def changed_count(stdout: str, stderr: str = "") -> int:
    """Sum of changed= over the hosts of the last PLAY RECAP."""
    return sum(counts["changed"] for counts in play_recap(stdout, stderr).values())


def render_role(tmp_path, role, tasks_from, facts, role_vars=None, inventory="localhost,"):
    """Include a role's render tasks and return the named facts (as rendered text); with an inventory, its
    variables for localhost apply (for example inventories/lab's)."""
    import json

    out = tmp_path / "facts.json"
    playbook = tmp_path / "render.yml"
    playbook.write_text(
        json.dumps(
            [
                {
                    "name": "Render",
                    "hosts": "localhost",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "name": "Render role templates",
                            "ansible.builtin.include_role": {"name": role, "tasks_from": tasks_from},
                            "vars": role_vars or {},
                        },
                        {
                            "name": "Dump facts",
                            "ansible.builtin.copy": {
                                "content": "{{{{ {{{}}} | to_json }}}}".format(", ".join(f"'{f}': {f}" for f in facts)),
                                "dest": str(out),
                                "mode": "0600",
                            },
                        },
                    ],
                }
            ]
        )
    )
    run_playbook(playbook, "-i", inventory, "-c", "local")
    return json.loads(out.read_text())
