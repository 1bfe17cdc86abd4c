"""The component versions the collection pins (versions.yml, its one list), for the lab and the tests."""

import functools

import yaml

from lab.paths import REPO_ROOT

VERSIONS_FILE = REPO_ROOT / "versions.yml"


@functools.cache
def _pinned() -> dict:
    return yaml.safe_load(VERSIONS_FILE.read_text())


def pinned(name: str) -> str:
    """The version versions.yml pins for `name` (KeyError naming the file when it pins none)."""
    try:
        return str(_pinned()[name])
    except KeyError:
        raise KeyError(f"{VERSIONS_FILE} pins no version of {name!r}") from None


def kube_tag(name: str = "kubernetes") -> str:
    """A Kubernetes version as its release tag (v1.36.3): the cache directories' and the binaries' spelling."""
    return "v" + pinned(name)
