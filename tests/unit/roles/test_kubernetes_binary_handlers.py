"""The kubernetes role's binary tasks (binaries.yml) restart kubelet on a node in the cluster when a binary changes
at install, for both sources: downloaded (get_url from a local HTTP server with .sha256 files, as dl.k8s.io serves
them) and copied from the controller; at upgrade they install the changed binary and notify nothing (upgrade.yml
restarts kubelet itself). The role's tasks run for real on localhost into a temp dir, with the variables
install_binary.yml and upgrade_binary.yml give them; a stand-in handler listening to the role's topic records each
notification (the real ones reload systemd and restart kubelet)."""

import functools
import hashlib
import http.server
import os
import pathlib
import subprocess
import sys
import threading

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
ROLE = ROOT / "roles/kubernetes"
TOPIC = "kubelet unit changed"
# The copy source first asks the node which binaries differ (one sha256sum), then copies those.
BINARY_TASKS = {
    "download": ["Download binaries"],
    "copy": ["Find the binaries that differ from the controller's", "Copy binaries from the controller"],
}
BINARIES = ["kubeadm", "kubelet"]
ROLE_VARS = yaml.safe_load((ROLE / "vars/main.yml").read_text())


def role_tasks(names):
    tasks = yaml.safe_load((ROLE / "tasks/binaries.yml").read_text())
    return [next(t for t in tasks if t["name"] == name) for name in names]


def include_vars(entry_point):
    """The variables install_binary.yml or upgrade_binary.yml pass to binaries.yml."""
    tasks = yaml.safe_load((ROLE / f"tasks/{entry_point}.yml").read_text())
    return next(t["vars"] for t in tasks if t.get("ansible.builtin.include_tasks") == "binaries.yml")


def publish(directory, version):
    """Fake binaries of `version` with dl.k8s.io's <name>.sha256 files (a bare hex digest)."""
    directory.mkdir(exist_ok=True)
    for name in BINARIES:
        content = f"#!/bin/sh\necho {name} {version}\n".encode()
        (directory / name).write_bytes(content)
        (directory / f"{name}.sha256").write_text(hashlib.sha256(content).hexdigest())


@pytest.fixture
def file_server(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield served, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def install_play(tmp_path, source, url, entry_point):
    """One play per source, running the role's binary tasks as `entry_point` includes them into its own directory;
    its stand-in handler writes a marker file when the role's topic fires."""
    bin_dir = tmp_path / f"bin-{source}"
    return {
        "name": source,
        "hosts": "localhost",
        "gather_facts": False,
        "vars": {
            **include_vars(entry_point),
            "kubernetes_binaries": BINARIES,
            "kubernetes_upgrade_binaries": BINARIES,
            "kubernetes_binary_dir": str(bin_dir),
            "kubernetes_binary_url": url,
            "kubernetes_binary_src_dir": str(tmp_path / "controller") if source == "copy" else "",
            "kubernetes_stale_files_script": ROLE_VARS["kubernetes_stale_files_script"],
        },
        "tasks": [
            {"name": "Binary directory", "ansible.builtin.file": {"path": str(bin_dir), "state": "directory"}},
            *role_tasks(BINARY_TASKS[source]),
        ],
        "handlers": [
            {
                "name": "Record the notification",
                "ansible.builtin.copy": {"content": "fired\n", "dest": str(tmp_path / f"notified-{source}")},
                "listen": TOPIC,
            }
        ],
    }


def install(tmp_path, url, entry_point="install_binary"):
    """Run the role's binary tasks of each source once; returns the sources whose handler topic fired."""
    for source in BINARY_TASKS:
        (tmp_path / f"notified-{source}").unlink(missing_ok=True)
    playbook = tmp_path / "install.yml"
    plays = [install_play(tmp_path, source, url, entry_point) for source in sorted(BINARY_TASKS)]
    playbook.write_text(yaml.safe_dump(plays, sort_keys=False))
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    argv = [pathlib.Path(sys.executable).parent / "ansible-playbook", "-i", "localhost,", "-c", "local"]
    argv += ["-e", f"ansible_python_interpreter={sys.executable}", str(playbook)]
    run = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180, check=False, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    return {source for source in BINARY_TASKS if (tmp_path / f"notified-{source}").exists()}


def test_the_role_reloads_and_restarts_kubelet_on_that_topic():
    handlers = yaml.safe_load((ROLE / "handlers/main.yml").read_text())
    actions = {next(k for k in h if k.startswith("ansible.builtin.")) for h in handlers if h.get("listen") == TOPIC}
    assert actions == {"ansible.builtin.systemd_service"}
    assert {h["ansible.builtin.systemd_service"].get("state") for h in handlers} == {None, "restarted"}


def test_a_changed_binary_notifies_the_kubelet_handler(tmp_path, file_server):
    served, url = file_server
    for directory in (served, tmp_path / "controller"):
        publish(directory, "v1.36.3")
    assert install(tmp_path, url) == {"copy", "download"}, "the first install must notify"
    for source in BINARY_TASKS:
        assert (tmp_path / f"bin-{source}/kubelet").read_text() == "#!/bin/sh\necho kubelet v1.36.3\n"
    assert install(tmp_path, url) == set(), "an unchanged binary notified"
    (tmp_path / "bin-copy/kubelet").chmod(0o700)
    assert install(tmp_path, url) == {"copy"}, "a binary whose mode drifted must be copied again"
    for directory in (served, tmp_path / "controller"):
        publish(directory, "v1.36.4")
    assert install(tmp_path, url) == {"copy", "download"}, "an upgraded binary must notify"
    for source in BINARY_TASKS:
        assert (tmp_path / f"bin-{source}/kubelet").read_text() == "#!/bin/sh\necho kubelet v1.36.4\n"


def test_the_upgrade_installs_the_binaries_without_the_handler(tmp_path, file_server):
    served, url = file_server
    for directory in (served, tmp_path / "controller"):
        publish(directory, "v1.36.4")
    assert install(tmp_path, url, "upgrade_binary") == set(), "the upgrade path restarts kubelet itself"
    for source in BINARY_TASKS:
        assert (tmp_path / f"bin-{source}/kubelet").read_text() == "#!/bin/sh\necho kubelet v1.36.4\n"
