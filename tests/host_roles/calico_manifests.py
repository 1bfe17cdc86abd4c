"""A Calico manifest directory for the cni role's `cni_calico_manifest_dir`, built without GitHub.

operator-crds.yaml: the REAL CustomResourceDefinitions, taken from the tigera/operator Go module (fetched
through the Go module proxy, cached in $TF_CACHE/go/mod): the set that operator bootstraps for Calico
(calico/* plus the operator.tigera.io kinds listed in its pkg/crds/crds.go), which is what upstream's
operator-crds.yaml carries. tigera-operator.yaml: a trimmed, labelled fixture (fixtures/calico/).
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess

import yaml

from tests.lab import bins

CALICO_VERSION = "v3.31.0"
OPERATOR_MODULE = "github.com/tigera/operator@v1.40.0"  # the operator Calico v3.31.0 ships
# The checksum database has no entry for this module here (404), so the module hash is pinned instead.
OPERATOR_MODULE_SUM = "h1:O5FFE3XKSNy9Cm8jGNO1VHQr9qsi5qjYBJxssg02A4A="
# pkg/crds/crds.go: the operator.tigera.io CRDs of Calico (open source), besides everything under calico/.
CALICO_OPERATOR_KINDS = (
    "installations",
    "apiservers",
    "gatewayapis",
    "imagesets",
    "tigerastatuses",
    "whiskers",
    "goldmanes",
    "managementclusterconnections",
)
OPERATOR_FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "calico" / "tigera-operator.yaml"


def operator_module_dir() -> pathlib.Path:
    """Download (or reuse) the tigera/operator module; returns its read-only directory."""
    cache = bins.tf_cache()
    env = {
        **os.environ,
        "GOMODCACHE": os.environ.get("TF_GOMODCACHE") or str(cache / "go" / "mod"),
        "GOFLAGS": "-mod=mod",
        "GOTOOLCHAIN": "local",
        "GONOSUMDB": OPERATOR_MODULE.split("@", maxsplit=1)[0],
    }
    out = subprocess.run(
        ["go", "mod", "download", "-json", OPERATOR_MODULE],
        env=env,
        cwd=cache,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"go mod download {OPERATOR_MODULE} failed:\n{out.stdout}\n{out.stderr}")
    info = json.loads(out.stdout)
    if info.get("Sum") != OPERATOR_MODULE_SUM:
        raise RuntimeError(f"{OPERATOR_MODULE}: module hash {info.get('Sum')} is not the pinned {OPERATOR_MODULE_SUM}")
    return pathlib.Path(info["Dir"])


def build(directory: pathlib.Path) -> pathlib.Path:
    """Write operator-crds.yaml and tigera-operator.yaml into `directory`; returns it."""
    module = operator_module_dir()
    shipped = yaml.safe_load((module / "config" / "calico_versions.yml").read_text())["title"]
    if shipped != CALICO_VERSION:
        raise RuntimeError(f"{OPERATOR_MODULE} ships Calico {shipped}, not {CALICO_VERSION}")
    crds = sorted((module / "pkg" / "crds" / "calico").glob("*.yaml"))
    crds += [module / "pkg" / "crds" / "operator" / f"operator.tigera.io_{kind}.yaml" for kind in CALICO_OPERATOR_KINDS]
    directory.mkdir(parents=True, exist_ok=True)
    docs = []
    for crd in crds:
        text = crd.read_text().strip().removeprefix("---").strip()
        docs.append(f"# Source: {OPERATOR_MODULE} pkg/crds/{crd.parent.name}/{crd.name}\n{text}\n")
    (directory / "operator-crds.yaml").write_text("---\n".join(docs))
    shutil.copyfile(OPERATOR_FIXTURE, directory / "tigera-operator.yaml")
    return directory
