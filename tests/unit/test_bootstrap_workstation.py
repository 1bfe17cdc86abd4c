"""scripts/bootstrap on a workstation: merges podman settings, never touches services, asks before root.

Runs the real script with /etc under a temporary root (TF_SYSCONF_ROOT) and PATH shims that record every call to
systemctl, apt-get and sudo; dpkg-query and id shims decide which packages are missing and who runs it. The last
test runs real podman on the drop-in bootstrap writes, in a private mount namespace (the machine's /etc is untouched).
"""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BOOTSTRAP = ROOT / "scripts/bootstrap"
USER_CONF = '# my podman settings\n[engine]\nevents_logger = "file"\n\n[network]\ndefault_subnet = "10.99.0.0/16"\n'
DROPIN = "containers/containers.conf.d/50-tokenfactory.conf"
RECORDED = ("systemctl", "apt-get", "sudo", "service")


class Workstation:
    def __init__(self, tmp: pathlib.Path):
        self.tmp = tmp
        self.etc = tmp / "root/etc"
        self.shims = tmp / "shims"
        self.calls = tmp / "calls.log"
        self.shims.mkdir()
        (self.etc / "containers").mkdir(parents=True)
        for name in RECORDED:
            self.shim(name, f'echo "{name} $*" >> {self.calls}')
        self.missing_packages()
        self.uid(0)

    def shim(self, name: str, body: str):
        path = self.shims / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)

    def missing_packages(self, *names):
        # dpkg-query -W -f='${Status}' PACKAGE: "install ok installed" unless PACKAGE is listed as missing.
        cases = "|".join(names) or "__none__"
        body = f'for p; do :; done\ncase "$p" in {cases}) exit 1 ;; esac\nprintf "install ok installed"'
        self.shim("dpkg-query", body)

    def uid(self, uid: int):
        self.shim("id", f"echo {uid}")

    def run(self, *args, fixes="runtime ulimits", **env):
        full_env = {
            **os.environ,
            "PATH": f"{self.shims}:{os.environ['PATH']}",
            "TF_SYSCONF_ROOT": str(self.tmp / "root"),
            "TF_STATE_DIR": str(self.tmp / "state"),
            "TF_PODMAN_FIXES": fixes,
            **env,
        }
        return subprocess.run([BOOTSTRAP, *args], capture_output=True, text=True, timeout=60, check=False, env=full_env)

    def recorded(self) -> list[str]:
        return self.calls.read_text().splitlines() if self.calls.exists() else []

    def tree(self) -> dict:
        return {p.relative_to(self.etc).as_posix(): p.read_bytes() for p in self.etc.rglob("*") if p.is_file()}


@pytest.fixture
def workstation(tmp_path):
    return Workstation(tmp_path)


def test_podman_settings_go_to_a_drop_in_and_user_content_is_kept(workstation):
    user_conf = workstation.etc / "containers/containers.conf"
    user_conf.write_text(USER_CONF)
    proc = workstation.run("--system-only")
    assert proc.returncode == 0, proc.stderr
    assert user_conf.read_text() == USER_CONF
    dropin = (workstation.etc / DROPIN).read_text()
    assert 'runtime = "runc"' in dropin
    assert 'default_ulimits = ["nofile=' in dropin
    assert dropin.index("[containers]") < dropin.index("default_ulimits") < dropin.index("[engine]")
    # It said what it changes, and why, before changing it.
    assert "these steps need root" in proc.stdout
    assert f"add the podman drop-in {workstation.etc / DROPIN}" in proc.stdout
    assert "your containers.conf files are left as they are" in proc.stdout
    assert workstation.recorded() == []


def test_second_run_changes_nothing(workstation):
    (workstation.etc / "containers/containers.conf").write_text(USER_CONF)
    assert workstation.run("--system-only").returncode == 0
    before = workstation.tree()
    mtime = (workstation.etc / DROPIN).stat().st_mtime_ns
    proc = workstation.run("--system-only")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert workstation.tree() == before
    assert (workstation.etc / DROPIN).stat().st_mtime_ns == mtime


def test_settings_the_user_already_made_are_not_overridden(workstation):
    conf_d = workstation.etc / "containers/containers.conf.d"
    conf_d.mkdir()
    (conf_d / "10-mine.conf").write_text('[containers]\ndefault_ulimits = ["nofile=4096:4096"]\n')
    (workstation.etc / "containers/containers.conf").write_text('[engine]\nruntime = "crun"\n')
    proc = workstation.run("--system-only")
    assert proc.returncode == 0, proc.stderr
    assert not (workstation.etc / DROPIN).exists(), "both settings are the user's: nothing to add"
    assert "kept your setting" in proc.stdout
    assert 'runtime = "crun"' in proc.stdout


def test_only_the_settings_the_user_did_not_make_are_added(workstation):
    (workstation.etc / "containers/containers.conf").write_text('[engine]\nruntime = "runc"\n')
    proc = workstation.run("--system-only")
    assert proc.returncode == 0, proc.stderr
    dropin = (workstation.etc / DROPIN).read_text()
    assert "default_ulimits" in dropin
    assert "runtime" not in dropin
    assert "kept your setting" not in proc.stdout, "the user's runc is what this machine needs: nothing to say"


def test_a_machine_that_needs_no_fix_gets_no_file(workstation):
    proc = workstation.run("--system-only", fixes="none")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert workstation.tree() == {}


def test_bad_fix_name_is_refused_naming_the_allowed_values(workstation):
    proc = workstation.run("--system-only", fixes="runtime crun")
    assert proc.returncode != 0
    assert "allowed values are auto, none, or a list of runtime, ulimits" in proc.stderr
    assert workstation.tree() == {}


def test_missing_packages_are_installed_and_services_left_alone(workstation):
    workstation.missing_packages("postgresql", "redis-server")
    proc = workstation.run("--system-only", fixes="none")
    assert proc.returncode == 0, proc.stderr
    assert "install the missing system packages postgresql redis-server" in proc.stdout
    assert "bootstrap leaves them" in proc.stdout
    calls = workstation.recorded()
    assert calls[0] == "apt-get update -qq"
    assert calls[1].startswith("apt-get install") and calls[1].endswith("postgresql redis-server")
    assert not [c for c in calls if c.split()[0] in ("systemctl", "service")], calls


def test_without_root_it_prints_the_commands_and_changes_nothing(workstation):
    workstation.uid(1000)
    workstation.missing_packages("redis-server")
    (workstation.etc / "containers/containers.conf").write_text(USER_CONF)
    before = workstation.tree()
    proc = workstation.run()  # the full bootstrap, not only the system steps
    assert proc.returncode == 1
    assert "not root, nothing was changed" in proc.stderr
    assert "sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install" in proc.stderr
    assert f"sudo install -D -m 0644 /dev/stdin {workstation.etc / DROPIN} <<'EOF'" in proc.stderr
    assert "scripts/bootstrap --system-only" in proc.stderr
    assert workstation.tree() == before
    assert workstation.recorded() == []
    assert not (workstation.tmp / "state").exists(), "nothing else may run before the root steps are done"


def test_printed_drop_in_command_writes_what_bootstrap_would(workstation, tmp_path):
    workstation.uid(1000)
    proc = workstation.run("--system-only")
    assert proc.returncode == 1
    command = proc.stderr.split("sudo install", 1)[1].split("\nEOF\n", 1)[0]
    subprocess.run(["bash", "-c", f"install{command}\nEOF\n"], check=True)
    workstation.uid(0)
    proc = workstation.run("--system-only")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "", "the printed command must leave nothing for bootstrap to do"


def python_shim(workstation, name, body):
    workstation.shim(name, body)
    return str(workstation.shims / name)


def test_python_search_skips_interpreters_that_do_not_run_or_are_too_old(workstation):
    broken = python_shim(workstation, "python3.12", 'echo "pyenv: python3.12: command not found" >&2; exit 127')
    old = python_shim(workstation, "python3.10", "echo 3.10")
    real = python_shim(workstation, "python3.11", f'exec {sys.executable} "$@"')
    venv = workstation.tmp / "no-venv-yet"
    proc = workstation.run(
        "--print-python", TF_VENV=str(venv), TF_PYTHON="", TF_PYTHON_CANDIDATES=f"{broken} {old} {real}"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == real
    proc = workstation.run("--print-python", TF_VENV=str(venv), TF_PYTHON="", TF_PYTHON_CANDIDATES=f"{broken} {old}")
    assert proc.returncode == 1
    assert "no Python 3.12 or 3.11 with the venv module found" in proc.stderr
    assert "TF_PYTHON=" in proc.stderr


def test_tf_python_older_than_3_11_is_refused(workstation):
    old = python_shim(workstation, "python3.10", "echo 3.10")
    proc = workstation.run("--print-python", TF_VENV=str(workstation.tmp / "v"), TF_PYTHON=old)
    assert proc.returncode == 1
    assert f"TF_PYTHON={old} is Python 3.10; 3.11 or newer is needed" in proc.stderr


def bash_rootfs(path: pathlib.Path) -> pathlib.Path:
    """The smallest root filesystem podman can run: bash and the libraries ldd names."""
    libs = subprocess.run(["ldd", "/bin/bash"], capture_output=True, text=True, check=True).stdout
    for source in ["/bin/bash", *(word for word in libs.split() if word.startswith("/"))]:
        target = path / source.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(pathlib.Path(source).read_bytes())
        target.chmod(0o755)
    for name in ("proc", "sys", "dev", "etc", "tmp"):
        (path / name).mkdir(exist_ok=True)
    return path


NEEDS_ROOT_AND_PODMAN = "needs root and podman: a private mount namespace over /etc/containers"


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("podman"), reason=NEEDS_ROOT_AND_PODMAN)
def test_the_drop_in_is_what_podman_reads(tmp_path):
    """Real podman, /etc/containers replaced (in a private mount namespace) by a copy without containers.conf."""
    etc = tmp_path / "etc-containers"
    etc.mkdir()
    for name in ("policy.json", "registries.conf"):
        (etc / name).write_bytes((pathlib.Path("/etc/containers") / name).read_bytes())
    rootfs = bash_rootfs(tmp_path / "rootfs")
    script = f"""
set -e
mount --bind {etc} /etc/containers
{BOOTSTRAP} --system-only
echo "second run: [$({BOOTSTRAP} --system-only)]"
podman info --format 'runtime={{{{.Host.OCIRuntime.Name}}}}'
podman run --rm --rootfs {rootfs} /bin/bash -c 'echo "nofile=$(ulimit -Hn) nproc=$(ulimit -Hu)"'
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TF_SYSCONF_ROOT", "TF_PODMAN_FIXES"))}
    proc = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "bash", "-c", script],
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr  # the container ran with what bootstrap wrote
    dropin = etc / "containers.conf.d/50-tokenfactory.conf"
    written = dropin.read_text() if dropin.exists() else ""
    assert "second run: []" in proc.stdout
    if 'runtime = "runc"' in written:
        assert "runtime=runc" in proc.stdout
    if limits := re.search(r'"nofile=(\d+):\d+", "nproc=(\d+):\d+"', written):
        assert f"nofile={limits[1]} nproc={limits[2]}" in proc.stdout
