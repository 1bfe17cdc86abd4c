"""Shared pytest set-up: every tests/<area>/fixtures.py is loaded as a plugin."""

import pathlib

pytest_plugins = sorted(
    f"tests.{path.parent.name}.fixtures" for path in pathlib.Path(__file__).parent.glob("*/fixtures.py")
)
