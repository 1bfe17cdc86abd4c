"""Where the lab binaries live, and building them on demand (scripts/build-k8s-lab-bins is idempotent)."""

import os
import pathlib
import subprocess

from lab.paths import SCRIPTS, tf_cache
from lab.versions import kube_tag

KUBE_VERSION = kube_tag()
BUILD_SCRIPT = SCRIPTS / "build-k8s-lab-bins"
# Everything scripts/build-k8s-lab-bins installs: the control plane, kwok, the node binaries and helm.
BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kwok",
    "kwokctl",
    "kubeadm",
    "kubelet",
    "helm",
)


def bin_dir() -> pathlib.Path:
    return tf_cache() / f"k8s-{KUBE_VERSION}" / "bin"


def kubectl() -> str:
    return str(bin_dir() / "kubectl")


def kwok_stage_dir() -> pathlib.Path:
    """kwok's upstream Stage definitions (node and pod lifecycle), installed by the build script."""
    return tf_cache() / f"k8s-{KUBE_VERSION}" / "kwok-stages"


def ensure_bins() -> pathlib.Path:
    """Return the binary directory, running the (cached, seconds when warm) build when anything is missing."""
    directory = bin_dir()
    if not all(os.access(directory / name, os.X_OK) for name in BINARIES) or not any(kwok_stage_dir().glob("*.yaml")):
        subprocess.run([str(BUILD_SCRIPT)], check=True)
    return directory
