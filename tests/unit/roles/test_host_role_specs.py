"""Each host role documents exactly the variables it defaults (meta/argument_specs.yml vs defaults/main.yml)."""

import pathlib

import pytest
import yaml

ROLES = pathlib.Path(__file__).resolve().parents[3] / "roles"
HOST_ROLES = ("preflight", "host_prep", "containerd", "kubernetes", "cni", "connectx")


def spec_options(role):
    """Options of every entry point (main and e.g. containerd's `images`), which share defaults/main.yml."""
    spec = yaml.safe_load((ROLES / role / "meta" / "argument_specs.yml").read_text())
    options = {}
    for entry_point in spec["argument_specs"].values():
        options.update(entry_point.get("options") or {})
    return options


@pytest.mark.parametrize("role", HOST_ROLES)
def test_argument_specs_match_defaults(role):
    defaults = yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text()) or {}
    options = spec_options(role)
    assert sorted(options) == sorted(defaults)
    assert all(option.get("description") for option in options.values())
    assert "## How it is tested" in (ROLES / role / "README.md").read_text()


@pytest.mark.parametrize("role", sorted(p.name for p in ROLES.iterdir() if (p / "tasks").is_dir()))
def test_every_role_specifies_its_defaults(role):
    """Every role (host roles and cluster add-ons) has argument specs covering each default it sets."""
    defaults = yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text()) or {}
    options = spec_options(role)
    assert set(defaults) <= set(options), sorted(set(defaults) - set(options))
    assert all(option.get("description") for option in options.values())
