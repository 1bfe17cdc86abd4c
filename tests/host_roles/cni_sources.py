"""The cni role's inputs without GitHub or chart repositories: Go modules from the module proxy.

Calico (`cni_calico_manifest_dir`): operator-crds.yaml holds the REAL CustomResourceDefinitions from the
tigera/operator module, the set that operator bootstraps for Calico (calico/* plus the operator.tigera.io kinds
listed in its pkg/crds/crds.go), which is what upstream's operator-crds.yaml carries; tigera-operator.yaml is a
trimmed, labelled fixture (fixtures/calico/).
Cilium (`cni_cilium_chart_dir`): the REAL chart, install/kubernetes/cilium of the cilium module.
Modules are cached in $TF_CACHE/go/mod (shared with scripts/build-k8s-lab-bins).
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess

import yaml

from lab.k8s import bins

CALICO_VERSION = "v3.31.0"
OPERATOR_MODULE = "github.com/tigera/operator@v1.40.0"  # the operator Calico v3.31.0 ships
# The checksum database has no entry for this module here (404), so its hash is pinned instead.
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
CILIUM_VERSION = "1.18.3"
CILIUM_MODULE = f"github.com/cilium/cilium@v{CILIUM_VERSION}"  # verified against the checksum database


def module_dir(module: str, pinned_sum: str | None = None) -> pathlib.Path:
    """Download (or reuse) a Go module; returns its read-only directory."""
    cache = bins.tf_cache()
    env = {
        **os.environ,
        "GOMODCACHE": os.environ.get("TF_GOMODCACHE") or str(cache / "go" / "mod"),
        "GOFLAGS": "-mod=mod",
        "GOTOOLCHAIN": "local",
    }
    if pinned_sum:
        env["GONOSUMDB"] = module.split("@", maxsplit=1)[0]
    argv = ["go", "mod", "download", "-json", module]
    out = subprocess.run(argv, env=env, cwd=cache, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"go mod download {module} failed:\n{out.stdout}\n{out.stderr}")
    info = json.loads(out.stdout)
    if pinned_sum and info.get("Sum") != pinned_sum:
        raise RuntimeError(f"{module}: module hash {info.get('Sum')} is not the pinned {pinned_sum}")
    return pathlib.Path(info["Dir"])


def calico_manifests(directory: pathlib.Path) -> pathlib.Path:
    """Write operator-crds.yaml and tigera-operator.yaml into `directory`; returns it."""
    module = module_dir(OPERATOR_MODULE, OPERATOR_MODULE_SUM)
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


def cilium_chart() -> pathlib.Path:
    """The unpacked cilium Helm chart of CILIUM_VERSION."""
    return module_dir(CILIUM_MODULE) / "install" / "kubernetes" / "cilium"


def lab_binary(name: str) -> str:
    """A binary from scripts/build-k8s-lab-bins (kubeadm, helm, ...), built first when missing."""
    return str(bins.ensure_bins() / name)
