"""Every role has Galaxy metadata (meta/main.yml) that agrees with the rest of the collection: its description is
the main entry point's short_description, license and Ansible version are the collection's, and the platforms
are where it runs - host roles on the operating systems preflight accepts, cluster roles on the controller."""

import pathlib

import pytest
import yaml

from tests.unit.roles.test_host_role_specs import HOST_ROLES

ROOT = pathlib.Path(__file__).resolve().parents[3]
ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "tasks").is_dir())
# Galaxy names releases by codename; preflight_supported_os by version.
CODENAMES = {("Ubuntu", "24.04"): "noble", ("Debian", "12"): "bookworm"}


def load(rel):
    return yaml.safe_load((ROOT / rel).read_text())


def host_platforms():
    supported = load("roles/preflight/vars/main.yml")["preflight_supported_os"]
    return {name: {CODENAMES[name, version] for version in versions} for name, versions in supported.items()}


@pytest.mark.parametrize("role", ROLES)
def test_role_metadata_agrees_with_the_collection(role):
    meta = load(f"roles/{role}/meta/main.yml")
    info = meta["galaxy_info"]
    main = load(f"roles/{role}/meta/argument_specs.yml")["argument_specs"]["main"]
    assert info["description"] == main["short_description"]
    assert [info["license"]] == load("galaxy.yml")["license"]
    requires = load("meta/runtime.yml")["requires_ansible"]
    assert requires == f">={info['min_ansible_version']}.0"
    assert info["author"] and info["standalone"] is False and meta["dependencies"] == []
    platforms = {p["name"]: set(p["versions"]) for p in info["platforms"]}
    assert platforms == (host_platforms() if role in HOST_ROLES else {"GenericLinux": {"all"}})


def test_host_roles_exist():
    assert set(HOST_ROLES) <= set(ROLES)
    assert host_platforms() == {"Ubuntu": {"noble"}, "Debian": {"bookworm"}}
