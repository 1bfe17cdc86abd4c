"""The tokenfactory.spark.progress callback (enabled by the project's ansible.cfg) prints the progress_line of each
retry of an until loop and of its last attempt, through a real ansible-playbook run."""

import json
import re

from tests.playbooks.ansible_run import ROOT, run_playbook

# A module that reports a phase which advances on every call (its state in a file), like an _info module watching
# a rollout.
STEPPING_MODULE = """#!/usr/bin/python
import json, pathlib
from ansible.module_utils.basic import AnsibleModule
module = AnsibleModule({"state_file": {"type": "path", "required": True}, "phases": {"type": "list"}})
path = pathlib.Path(module.params["state_file"])
calls = int(path.read_text()) if path.exists() else 0
path.write_text(str(calls + 1))
phases = module.params["phases"]
phase = phases[min(calls, len(phases) - 1)]
module.exit_json(phase=phase, progress_line=f"Thing t/x: {phase}, {calls}/3 ready")
"""


def playbook(tmp_path, phases, retries):
    (tmp_path / "library").mkdir()
    (tmp_path / "library" / "stepping.py").write_text(STEPPING_MODULE)
    book = tmp_path / "wait.yml"
    task = {
        "name": "Watch the thing",
        "stepping": {"state_file": str(tmp_path / "calls"), "phases": phases},
        "register": "thing",
        "until": "thing.phase == 'Ready'",
        "retries": retries,
        "delay": 0,
    }
    book.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [task]}]))
    return book


def test_each_retry_prints_its_progress_line(tmp_path):
    book = playbook(tmp_path, ["Pending", "Progressing", "Progressing", "Ready"], 5)
    out = run_playbook(book, "-i", "localhost,", "-c", "local", "-M", tmp_path / "library", cwd=ROOT).stdout
    lines = re.findall(r"\[localhost\] (waiting|done) (\d+)(?:/(\d+))?, \d+s: (.*)", out)
    assert [(mark, look, line) for mark, look, _total, line in lines] == [
        ("waiting", "1", "Thing t/x: Pending, 0/3 ready"),
        ("waiting", "2", "Thing t/x: Progressing, 1/3 ready"),
        ("waiting", "3", "Thing t/x: Progressing, 2/3 ready"),
        ("done", "4", "Thing t/x: Ready, 3/3 ready"),
    ], out
    # ansible-core makes `retries: 5` six attempts: the line counts attempts.
    assert all(total == "6" for mark, _look, total, _line in lines if mark == "waiting")


def test_the_last_line_shows_when_the_wait_runs_out(tmp_path):
    book = playbook(tmp_path, ["Pending", "Failed"], 3)
    proc = run_playbook(book, "-i", "localhost,", "-c", "local", "-M", tmp_path / "library", cwd=ROOT, check=False)
    assert proc.returncode != 0
    assert re.search(r"\[localhost\] done 4, \d+s: Thing t/x: Failed, 3/3 ready", proc.stdout), proc.stdout
