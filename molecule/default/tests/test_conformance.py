"""A focused subset of the upstream Kubernetes conformance suite against the real pair, upgraded.

e2e.test is built from the same k8s.io/kubernetes v1.36.3 module as the cluster (scripts/build-k8s-lab-bins e2e);
its test images (agnhost, glibc-dns-testing, busybox at the tags the suite names) are built offline by
scripts/build-e2e-images and loaded by converge.yml, so nothing is pulled. Why this subset, how long it takes and
what cannot pass here: docs/host-roles.md ("Upstream conformance subset")."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import xml.etree.ElementTree as ET

import pytest

from tests.host_roles.cluster_checks import KUBE_VERSION

pytestmark = pytest.mark.molecule

# [Conformance] tests of DNS, Services, pod lifecycle and configuration volumes, each needing only images built here
# and at most a couple of pods (2 shared cores). Ginkgo's full text of each starts with the name given here.
SUBSET = [
    "[sig-network] DNS should provide DNS for the cluster ",
    "[sig-network] DNS should provide DNS for services ",
    "[sig-network] DNS should provide /etc/hosts entries for the cluster ",
    "[sig-network] Services should serve a basic endpoint from pods ",
    "[sig-network] Services should be able to change the type from ExternalName to ClusterIP ",
    "[sig-network] Services should find a service from listing all namespaces ",
    "[sig-node] Pods should get a host IP ",
    "[sig-node] Pods should be updated ",
    "[sig-node] Container Lifecycle Hook when create a pod with lifecycle hook "
    "should execute poststart exec hook properly ",
    "[sig-storage] ConfigMap should be consumable from pods in volume [",
    "[sig-storage] Secrets should be consumable from pods in volume [",
]
# The whole run, suite setup and namespace clean-up included (measured 2026-12-05: docs/host-roles.md).
TIMEOUT_S = 900


def lab_dir():
    cache = os.environ.get("TF_CACHE") or str(
        pathlib.Path(os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache", "tokenfactory")
    )
    return pathlib.Path(cache, f"k8s-{KUBE_VERSION}")


def go_regexp_literal(text):
    """`text` as a literal in a Go (RE2) regular expression: RE2 refuses escapes of letters, digits and spaces."""
    return re.sub(r"([\\.+*?()|\[\]{}^$])", r"\\\1", text)


def junit_cases(junit):
    """(name, outcome) of every spec in e2e.test's JUnit report; outcome is passed, failed or skipped."""
    cases = []
    for case in ET.parse(junit).getroot().iter("testcase"):  # noqa: S314 - e2e.test's own report
        outcome = "passed"
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = "failed"
        elif case.find("skipped") is not None:
            outcome = "skipped"
        cases.append((case.get("name", ""), outcome))
    return cases


@pytest.fixture(scope="module")
def conformance_run(tmp_path_factory):
    report_dir = tmp_path_factory.mktemp("conformance")
    kubeconfig = pathlib.Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "tokenfactory-admin.conf")
    argv = [
        str(lab_dir() / "e2e-bin/e2e.test"),
        f"--kubeconfig={kubeconfig}",
        "--provider=skeleton",
        f"--kubectl-path={lab_dir() / 'bin/kubectl'}",
        f"--report-dir={report_dir}",
        f"--e2e-output-dir={report_dir}",
        "--ginkgo.focus=" + "|".join(f"{go_regexp_literal(name)}.*\\[Conformance\\]" for name in SUBSET),
        "--ginkgo.no-color",
        f"--ginkgo.timeout={TIMEOUT_S - 60}s",
    ]
    run = subprocess.run(  # noqa: S603 - the suite built here
        argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False, cwd=report_dir
    )
    (report_dir / "e2e.log").write_text(run.stdout + run.stderr)
    junit = report_dir / "junit_01.xml"
    assert junit.is_file(), (
        f"e2e.test wrote no JUnit report (rc {run.returncode}):\n{(run.stdout + run.stderr)[-4000:]}"
    )
    return run, junit_cases(junit), report_dir


def test_the_suite_is_the_clusters_version():
    version = subprocess.run(  # noqa: S603 - the suite built here
        [str(lab_dir() / "e2e-bin/e2e.test"), "--version"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert KUBE_VERSION in version


@pytest.mark.parametrize("name", SUBSET)
def test_conformance_spec_passes(conformance_run, name):
    run, cases, report_dir = conformance_run
    matching = [(case, outcome) for case, outcome in cases if case.startswith(f"[It] {name}")]
    ran = [(case, outcome) for case, outcome in matching if outcome != "skipped"]
    assert len(ran) == 1, f"{name!r} ran {len(ran)} times (report {report_dir}): {matching}"
    assert "[Conformance]" in ran[0][0]
    assert ran[0][1] == "passed", f"{ran[0][0]} {ran[0][1]}; log: {report_dir / 'e2e.log'}\n{run.stdout[-3000:]}"


def test_nothing_outside_the_subset_ran(conformance_run):
    run, cases, report_dir = conformance_run
    # Specs are "[It] ..."; the suite's setup and report nodes ([SynchronizedBeforeSuite], ...) are not.
    ran = [case for case, outcome in cases if outcome != "skipped" and case.startswith("[It] ")]
    assert len(ran) == len(SUBSET), f"{ran} (report {report_dir})"
    assert run.returncode == 0, run.stdout[-3000:]
