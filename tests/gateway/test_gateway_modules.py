"""tenant, api_key and usage_info modules against a real gateway: idempotence, check mode, key shown once."""

import json
import os
import pathlib
import subprocess
import sys

import openai
import pytest
import yaml

from tests.engine.synthetic import SyntheticUpstream
from tests.gateway.gateway import ROOT, deployment_objects
from lab.wait import wait_until

pytestmark = pytest.mark.gateway
MODEL = "tiny-qwen2"


def run_tasks(gw, tmp_path, tasks, check=False):
    """Run tasks on localhost; returns {task name: result}."""
    play = [{"hosts": "localhost", "gather_facts": False,
             "module_defaults": {"group/tokenfactory.spark.gateway_admin": {"gateway_url": gw.admin_url}},
             "tasks": [{**t, "register": f"r{i}"} for i, t in enumerate(tasks)]
             + [{"ansible.builtin.copy": {"dest": str(tmp_path / "results.json"),
                 "content": "{{ {" + ", ".join(f"'{t['name']}': r{i}" for i, t in enumerate(tasks)) + "} | to_json }}"},
                 "check_mode": False}]}]  # fmt: skip
    book = tmp_path / "play.yml"
    book.write_text(yaml.safe_dump(play))
    env = {**os.environ, "TF_GATEWAY_ADMIN_TOKEN": gw.admin_token, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")}
    cmd = [pathlib.Path(sys.executable).parent / "ansible-playbook", "-i", "localhost,", "-c", "local", "-v", book,
           "-e", f"ansible_python_interpreter={sys.executable}"]  # fmt: skip
    proc = subprocess.run(
        cmd + (["--check", "--diff"] if check else []), env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return json.loads((tmp_path / "results.json").read_text()), proc.stdout


def test_modules_are_idempotent_check_mode_safe_and_show_the_key_once(gateway_factory, tmp_path):
    with SyntheticUpstream(model=MODEL) as upstream:
        gw = gateway_factory(deployment_objects("tiny", MODEL, upstream.base_url, tenants=[]))
        tenant = {
            "tokenfactory.spark.tenant": {"name": "acme", "models": [MODEL], "limits": {"requests_per_minute": 50}}
        }
        key = {"tokenfactory.spark.api_key": {"tenant": "acme", "name": "ci"}, "no_log": True}
        planned, out = run_tasks(gw, tmp_path, [{"name": "tenant", **tenant}], check=True)
        assert planned["tenant"]["changed"] is True
        assert gw.admin("GET", "/tenants/acme")[0] == 404, "check mode wrote nothing"
        first, out = run_tasks(gw, tmp_path, [{"name": "tenant", **tenant}, {"name": "key", **key}])
        assert first["tenant"]["changed"] and first["key"]["changed"]
        value = first["key"]["key"]
        assert value.startswith("tfk-") and "key" not in first["key"]["api_key"]
        assert value not in out and gw.admin_token not in out
        again = run_tasks(gw, tmp_path, [{"name": "tenant", **tenant}, {"name": "key", **key}])[0]
        assert not again["tenant"]["changed"] and not again["key"]["changed"] and "key" not in again["key"]
        reply = openai.OpenAI(base_url=gw.url + "/v1", api_key=value, max_retries=0).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=3
        )
        wait_until(lambda: gw.sql("SELECT count(*) FROM usage_records") == "1", 10, "ledger row")
        usage = {"tokenfactory.spark.usage_info": {"tenant": "acme", "group_by": ["tenant", "key", "model"]}}
        revoke = {"tokenfactory.spark.api_key": {"tenant": "acme", "name": "ci", "state": "absent"}}
        tasks = [{"name": "usage", **usage}, {"name": "revoke", **revoke}, {"name": "revoke_again", **revoke}]
        last = run_tasks(gw, tmp_path, tasks)[0]
        row = last["usage"]["usage"][0]
        assert (row["key_name"], row["completion_tokens"]) == ("ci", reply.usage.completion_tokens)
        assert last["revoke"]["changed"] and not last["revoke_again"]["changed"]
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=gw.url + "/v1", api_key=value, max_retries=0).models.list()


def test_key_file_receives_the_key_instead_of_the_result(gateway_factory, tmp_path):
    gw = gateway_factory(deployment_objects("tiny", MODEL, "http://127.0.0.1:9"))
    key_file = tmp_path / "acme.key"
    to_file = {"tenant": "acme", "name": "svc", "key_file": str(key_file)}
    tasks = [{"name": "tenant", "tokenfactory.spark.tenant": {"name": "acme"}},
             {"name": "key", "tokenfactory.spark.api_key": to_file},
             {"name": "bad", "tokenfactory.spark.api_key": {"tenant": "nobody", "name": "svc"},
              "ignore_errors": True}]  # fmt: skip
    result = run_tasks(gw, tmp_path, tasks)[0]
    assert "key" not in result["key"] and key_file.read_text().startswith("tfk-")
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    assert result["bad"]["failed"] and "tenant 'nobody' not found" in result["bad"]["msg"]


def test_budgets_set_through_the_modules_are_idempotent_and_refuse_bad_amounts(gateway_factory, tmp_path):
    gw = gateway_factory(deployment_objects("tiny", MODEL, "http://127.0.0.1:9"))
    tenant = {"tokenfactory.spark.tenant": {"name": "acme", "budget": {"amount": "25.00"}}}
    key = {"tokenfactory.spark.api_key": {"tenant": "acme", "name": "ci", "budget": {"period": "day", "tokens": 9000}},
           "no_log": True}  # fmt: skip
    bad = {"tokenfactory.spark.tenant": {"name": "acme", "budget": {"amount": "a lot"}}, "ignore_errors": True}
    tasks = [{"name": "tenant", **tenant}, {"name": "key", **key}]
    first = run_tasks(gw, tmp_path, tasks)[0]
    assert first["tenant"]["tenant"]["budget"] == {"period": "month", "amount": "25", "tokens": 0}
    assert first["key"]["api_key"]["budget"] == {"period": "day", "amount": "0", "tokens": 9000}
    again = run_tasks(gw, tmp_path, [*tasks, {"name": "bad", **bad}])[0]
    assert not again["tenant"]["changed"] and not again["key"]["changed"]
    assert again["bad"]["failed"] and "budget.amount must be a non-negative decimal" in again["bad"]["msg"]
    assert gw.admin("GET", "/tenants/acme")[1]["budget"]["amount"] == "25", "a refused change changed nothing"
