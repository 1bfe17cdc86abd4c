"""The lab package is the one home of lab infrastructure: tests import it, it never imports tests."""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def imported_modules(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def test_lab_never_imports_tests():
    offending = {
        str(path.relative_to(ROOT)): module
        for path in (ROOT / "lab").rglob("*.py")
        for module in imported_modules(path)
        if module == "tests" or module.startswith("tests.")
    }
    assert not offending, f"lab/ must not import tests: {offending}"


def test_lab_playbooks_call_the_lab_package():
    for playbook in (ROOT / "lab").glob("*.yml"):
        assert "-m tests." not in playbook.read_text(), f"{playbook.name} runs a module of tests/"


def test_process_helpers_are_written_once():
    """free_port and the polling helper live in lab/ only; tests and the lab itself reuse them."""
    definitions = {}
    for path in [*(ROOT / "lab").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name in {"free_port", "wait_until", "wait_for"}:
                definitions.setdefault(node.name, []).append(str(path.relative_to(ROOT)))
    assert definitions == {"free_port": ["lab/processes.py"], "wait_until": ["lab/wait.py"]}


def test_postgres_bin_is_the_newest_installed_major(tmp_path):
    from lab.datastores import postgres_bin

    assert postgres_bin(tmp_path) == tmp_path / "15/bin", "nothing installed: the Debian 12 path, named in errors"
    for major in ("9", "15", "16", "common"):
        (tmp_path / major / "bin").mkdir(parents=True)
    assert postgres_bin(tmp_path) == tmp_path / "16/bin"
