"""Run a job template the way AWX does: a private data directory for ansible-runner, credentials injected like
AWX's CredentialType.inject_credential, extra vars merged like a workflow node's, artifacts read from set_stats.

What AWX does, and what this mirrors:
- Credential injectors are Jinja templates rendered in an ImmutableSandboxedEnvironment. The namespace holds the
  credential's non-empty inputs (booleans default to False) and `tower`; each `file` injector is rendered to a
  temporary file under env/ (mode 0660) whose path becomes tower.filename (one file) or tower.filename.<label>;
  `env` injectors go to the job's environment; `extra_vars` injectors are rendered to a temporary file under env/
  (every string tagged !unsafe, mode 0440) passed as `-e @file` on the command line (env/cmdline).
- Extra vars (env/extravars): the template's extra_vars, then its survey defaults, then the ancestors' artifacts,
  then the workflow job's extra vars (WorkflowJobNode.get_job_kwargs). Launch-time values are !unsafe (AWX's
  default ALLOW_JINJA_IN_EXTRA_VARS=template allows Jinja only in the template's own extra_vars).
- ansible-runner puts `-e @env/extravars` after env/cmdline, so job extra vars win over credential extra vars.
- A job's artifacts are the `artifact_data` of its playbook_on_stats event (set_stats with per_host: false).
"""

import contextlib
import os
import pathlib
import stat
import sys
import tempfile

import ansible_runner
import yaml
from jinja2 import sandbox

from tests.awx.definitions import awx_file, survey

BIN = pathlib.Path(sys.executable).parent


class Unsafe(str):
    """A string AWX writes with the !unsafe tag (never templated by Ansible)."""


class _Dumper(yaml.SafeDumper):
    """Writes Unsafe strings with Ansible's !unsafe tag, as AWX's safe_dump does."""


_Dumper.add_representer(Unsafe, lambda dumper, data: dumper.represent_scalar("!unsafe", str(data)))


def dump(data):
    return yaml.dump(data, Dumper=_Dumper, default_flow_style=False)


def unsafe(value):
    if isinstance(value, dict):
        return {k: unsafe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unsafe(v) for v in value]
    return Unsafe(value) if isinstance(value, str) else value


def credential_type(name):
    return next(t for t in awx_file("credential_types.yml")["credential_types"] if t["name"] == name)


class _Namespace:
    pass


def inject_credential(ctype, inputs, private_data_dir):
    """Render a credential type's injectors for `inputs`; returns (env, cmdline args)."""
    env_dir = pathlib.Path(private_data_dir) / "env"
    env_dir.mkdir(parents=True, exist_ok=True)
    tower = _Namespace()
    namespace = {"tower": tower}
    for field in ctype["inputs"]["fields"]:
        value = inputs.get(field["id"])
        if field["type"] == "boolean":
            namespace[field["id"]] = bool(value)
        elif value:
            namespace[field["id"]] = value
    render = sandbox.ImmutableSandboxedEnvironment()
    injectors = ctype.get("injectors", {})
    for label, template in injectors.get("file", {}).items():
        handle, path = tempfile.mkstemp(dir=env_dir)
        with os.fdopen(handle, "w") as out:
            out.write(render.from_string(template).render(**namespace))
        os.chmod(path, stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IWGRP)
        if "." not in label:
            tower.filename = path
        else:
            if not hasattr(tower, "filename"):
                tower.filename = _Namespace()
            setattr(tower.filename, label.split(".")[1], path)
    env = {var: render.from_string(template).render(**namespace) for var, template in injectors.get("env", {}).items()}
    args = []
    extra_vars = {k: render.from_string(t).render(**namespace) for k, t in injectors.get("extra_vars", {}).items()}
    if extra_vars:
        handle, path = tempfile.mkstemp(dir=env_dir)
        with os.fdopen(handle, "w") as out:
            out.write(dump(unsafe(extra_vars)))
        os.chmod(path, stat.S_IRUSR | stat.S_IRGRP)
        args += ["-e", f"@{path}"]
    return env, args


def node_extra_vars(template, artifacts=None, workflow_vars=None, job_extra_vars=None):
    """Extra vars of a job launched from a workflow node (or alone when artifacts/workflow_vars are None)."""
    values = dict(job_extra_vars or {})
    values.update(unsafe({q["variable"]: q["default"] for q in survey(template["survey"])["spec"] if "default" in q}))
    values.update(unsafe(artifacts or {}))
    values.update(unsafe(workflow_vars or {}))
    return values


def template_extra_vars(awx_state_dir):
    """The extra vars awx/configure.yml sets on every job template, for this state directory."""
    (play,) = awx_file("configure.yml")
    (task,) = [t for t in play["tasks"] if "awx.awx.job_template" in t]
    render = sandbox.ImmutableSandboxedEnvironment()
    return {
        name: render.from_string(value).render(awx_state_dir=str(awx_state_dir))
        for name, value in task["awx.awx.job_template"]["extra_vars"].items()
    }


def job_template(name):
    return next(t for t in awx_file("job_templates.yml")["job_templates"] if t["name"] == name)


class Job:
    def __init__(self, runner, private_data_dir):
        self.runner = runner
        self.private_data_dir = private_data_dir
        self.stdout = pathlib.Path(runner.config.artifact_dir, "stdout").read_text()

    @property
    def artifacts(self):
        stats = [e for e in self.runner.events if e.get("event") == "playbook_on_stats"]
        return stats[-1]["event_data"].get("artifact_data", {}) if stats else {}


def run_job(template, private_data_dir, project, inventory, extra_vars, credentials=(), envvars=None, job_tags=None):
    """Lay out AWX's private data directory and run the template's playbook with ansible_runner.run().

    credentials: (credential type name, inputs) pairs, injected in order like the job's credentials.
    """
    pdd = pathlib.Path(private_data_dir)
    (pdd / "env").mkdir(parents=True, exist_ok=True)
    env = {"PATH": f"{BIN}:{os.environ['PATH']}", **(envvars or {})}
    args = []
    for type_name, inputs in credentials:
        cred_env, cred_args = inject_credential(credential_type(type_name), inputs, pdd)
        env.update(cred_env)
        args += cred_args
    (pdd / "env" / "extravars").write_text(dump(extra_vars))
    (pdd / "env" / "envvars").write_text(yaml.safe_dump(env))
    if args:
        (pdd / "env" / "cmdline").write_text(" ".join(args))
    with job_environment():
        runner = ansible_runner.run(
            private_data_dir=str(pdd),
            project_dir=str(project),
            playbook=template["playbook"],
            inventory=str(inventory),
            tags=job_tags,
            quiet=True,
            timeout=600,
        )
    return Job(runner, pdd)


@contextlib.contextmanager
def job_environment():
    """An AWX job starts without the caller's ANSIBLE_* settings (runner copies this process's environment)."""
    saved = {k: os.environ.pop(k) for k in [k for k in os.environ if k.startswith("ANSIBLE_")]}
    try:
        yield
    finally:
        os.environ.update(saved)
