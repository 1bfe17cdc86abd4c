"""tenant and api_key check a limit against the domain's bound before calling the gateway (none runs here)."""

import contextlib
import importlib
import io
import json

import pytest
from ansible.module_utils.testing import patch_module_args

from lab.processes import free_port

CONNECTION = {"gateway_url": f"http://127.0.0.1:{free_port()}", "admin_token": "not-used"}


def run(module_name, **args):
    module = importlib.import_module(f"ansible_collections.tokenfactory.spark.plugins.modules.{module_name}")
    out = io.StringIO()
    with patch_module_args({**CONNECTION, **args}), contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        module.main()
    return json.loads(out.getvalue())


@pytest.mark.parametrize(
    ("module_name", "args"), [("tenant", {"name": "acme"}), ("api_key", {"tenant": "acme", "name": "ci"})]
)
def test_a_limit_above_the_bound_fails_naming_the_option(module_name, args):
    result = run(module_name, limits={"tokens_per_minute": 1_000_000_001}, **args)
    assert result["failed"]
    assert result["msg"] == (
        "limits.tokens_per_minute: 1000000001 is out of range; allowed 0..1000000000 per minute (0 = unlimited)"
    )


def test_within_the_bound_the_gateway_is_asked():
    result = run("tenant", name="acme", limits={"requests_per_minute": 1_000_000_000})
    assert result["failed"] and result["msg"].startswith(f"cannot reach the gateway at {CONNECTION['gateway_url']}")
