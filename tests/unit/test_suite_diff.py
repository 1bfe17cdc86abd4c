"""scripts/suite_diff.py on two suite.json files as run_lanes.py writes them: gone, new and moved test ids, the
component starts before and after, and the exit status when a test is gone."""

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def record(tests, components, seconds=10):
    return {
        "lane": "l",
        "result": "PASS",
        "seconds": seconds,
        "cpu_seconds": 1,
        "tests": tests,
        "components": components,
    }


def diff(tmp_path, before, after, *extra):
    paths = []
    for name, suite in (("before", before), ("after", after)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(suite))
        paths.append(str(path))
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts/suite_diff.py"), *paths, *extra],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


BEFORE = {
    "molecule-pair": record(["PASSED molecule/pair/tests/test_pair.py::test_link"], {"kubelet": 2}),
    "test-rehearsal-pair": record(["PASSED tests/rehearsal/test_p.py::test_serve"], {"kubelet": 2, "vllm": 2}),
    "unit": record(["PASSED tests/unit/test_a.py::test_a", "FAILED tests/unit/test_a.py::test_b"], {}),
}


def test_the_same_tests_in_fewer_clusters_show_as_moved_and_fewer_starts(tmp_path):
    after = {
        "test-rehearsal-pair": record(
            ["PASSED tests/rehearsal/test_p.py::test_serve", "PASSED molecule/pair/tests/test_pair.py::test_link"],
            {"kubelet": 2, "vllm": 2},
        ),
        "unit": record(["PASSED tests/unit/test_a.py::test_a", "PASSED tests/unit/test_a.py::test_b"], {}),
    }
    proc = diff(tmp_path, BEFORE, after)
    assert proc.returncode == 0, proc.stdout
    assert "tests: 4 ids before, 4 after; 0 gone, 0 new, 1 in another tier" in proc.stdout
    assert "moved: molecule/pair/tests/test_pair.py::test_link: molecule-pair -> test-rehearsal-pair" in proc.stdout
    assert "  kubelet             4 ->    2" in proc.stdout
    assert "  vllm                2 ->    2" in proc.stdout
    assert "molecule-pair              PASS 10 s, 1 CPU-s; kubelet x2  ->  -" in proc.stdout


def test_a_gone_test_fails_unless_allowed(tmp_path):
    after = {"unit": record(["PASSED tests/unit/test_a.py::test_a", "PASSED tests/unit/test_c.py::test_c"], {})}
    proc = diff(tmp_path, BEFORE, after)
    assert proc.returncode == 1
    assert "3 gone, 1 new" in proc.stdout
    assert "gone: tests/unit/test_a.py::test_b (unit)" in proc.stdout
    assert "new: tests/unit/test_c.py::test_c (unit)" in proc.stdout
    assert diff(tmp_path, BEFORE, after, "--allow-gone").returncode == 0
