"""The credential-injection renderer (tests/awx/awx_runner.py) renders awx/credential_types.yml as AWX does."""

import pathlib
import stat

import pytest
import yaml
from jinja2.exceptions import SecurityError

from tests.awx.awx_runner import credential_type, dump, inject_credential, node_extra_vars, job_template
from tests.awx.definitions import _Loader

KUBECONFIG = "apiVersion: v1\nkind: Config\nclusters: []\n"


def read_extra_vars(args):
    assert args[0] == "-e" and args[1].startswith("@")
    path = args[1][1:]
    text = pathlib.Path(path).read_text()
    return path, text, yaml.load(text, Loader=_Loader)  # noqa: S506 - SafeLoader subclass


def test_file_injector_feeds_env_and_extra_vars(tmp_path):
    env, args = inject_credential(credential_type("Token Factory kubeconfig"), {"kubeconfig": KUBECONFIG}, tmp_path)
    kubeconfig = env["K8S_AUTH_KUBECONFIG"]
    assert kubeconfig.startswith(str(tmp_path / "env"))
    assert pathlib.Path(kubeconfig).read_text() == KUBECONFIG
    assert stat.S_IMODE((tmp_path / "env" / kubeconfig.rsplit("/", 1)[1]).stat().st_mode) == 0o660
    path, text, values = read_extra_vars(args)
    # An unset optional input renders empty (AWX leaves it out of the namespace); strings are !unsafe.
    assert values == {"tf_kubeconfig": kubeconfig, "tf_kube_context": ""}
    assert "tf_kubeconfig: !unsafe" in text
    assert stat.S_IMODE((tmp_path / "env" / path.rsplit("/", 1)[1]).stat().st_mode) == 0o440


def test_optional_input_is_rendered_when_given(tmp_path):
    args = inject_credential(
        credential_type("Token Factory kubeconfig"), {"kubeconfig": KUBECONFIG, "context": "admin@spark"}, tmp_path
    )[1]
    assert read_extra_vars(args)[2]["tf_kube_context"] == "admin@spark"


def test_env_only_injector_passes_no_extra_vars(tmp_path):
    env, args = inject_credential(
        credential_type("Token Factory gateway admin"),
        {"gateway_url": "https://gw.example:30443", "admin_token": "t0ken"},
        tmp_path,
    )
    assert env == {"TF_GATEWAY_URL": "https://gw.example:30443", "TF_GATEWAY_ADMIN_TOKEN": "t0ken"}
    assert args == []
    assert not list((tmp_path / "env").iterdir())


def test_injected_values_are_not_templated_again(tmp_path):
    """A secret that looks like Jinja reaches the playbook literally (AWX's !unsafe)."""
    token = "hf_{{ lookup('env','HOME') }}"
    args = inject_credential(credential_type("Hugging Face token"), {"hf_token": token}, tmp_path)[1]
    text, values = read_extra_vars(args)[1:]
    assert values == {"tf_hf_token": token}
    assert text.startswith("tf_hf_token: !unsafe")


def test_sandbox_refuses_unsafe_templates(tmp_path):
    """Injectors render in AWX's immutable sandbox: no private attributes, no mutating calls."""
    for template in ("{{ x.__class__.__name__ }}", "{{ tower.__dict__.update({}) }}"):
        ctype = {"inputs": {"fields": [{"id": "x", "type": "string"}]}, "injectors": {"env": {"X": template}}}
        with pytest.raises(SecurityError):
            inject_credential(ctype, {"x": "v"}, tmp_path)


def test_workflow_precedence_of_extra_vars():
    """template extra_vars < survey defaults < ancestors' artifacts < workflow job extra vars."""
    serve = job_template("Token Factory - serve model")
    values = node_extra_vars(
        serve,
        artifacts={"tf_kubeconfig": "/state/c.kubeconfig", "tf_namespace": "from-artifact"},
        workflow_vars={"tf_namespace": "from-workflow"},
        job_extra_vars={"tf_kubeconfig_dir": "/state", "tf_gpu_type": "from-template"},
    )
    assert values["tf_kubeconfig_dir"] == "/state"
    assert values["tf_gpu_type"] == "NVIDIA-GB10"
    assert values["tf_kubeconfig"] == "/state/c.kubeconfig"
    assert values["tf_namespace"] == "from-workflow"
    assert "!unsafe" in dump(values) and "tf_kubeconfig_dir: /state" in dump(values)
