"""LabCluster: etcd + kube-apiserver + controller-manager + scheduler + kwok on loopback, with simulated nodes."""

import atexit
import contextlib
import json
import os
import pathlib
import shutil
import signal
import ssl
import sys
import time
import urllib.request

from lab import processes
from lab.k8s import bins, kubeconfig, nodes, pki
from lab.paths import lab_root

SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.244.0.0/16"
NODE_LEASE_SECONDS = 40
# Ports are picked free, but another process may bind one before our component does; and a component
# killed by a signal before it is ready (no exit of its own) is an outside event, retried like a port race.
START_ATTEMPTS = 3
TRANSIENT = ("address already in use", "killed by")


class LabError(RuntimeError):
    """The lab cluster could not be started or found; the message carries the failing component's log tail."""


class LabCluster:
    """One lab cluster, state in <lab_root>/<name>. Use as a context manager or call start()/stop().

    tie_to_parent=True (tests) makes the kernel kill the components if this Python process dies;
    the CLI passes False so the cluster outlives `python -m lab up`.
    """

    def __init__(self, profile: str = "spark-single", name: str | None = None, *, tie_to_parent: bool = True):
        self.node_manifests = nodes.load_profile(profile)
        self.profile = profile
        self.name = name or profile
        self.tie_to_parent = tie_to_parent
        self.dir = lab_root() / self.name
        self.state_path = self.dir / "state.json"
        self.kubeconfig = self.dir / "admin.kubeconfig"
        self.server = self._read_state().get("server", "")  # set when attaching to a running cluster
        self._procs: dict[str, dict] = {}
        self._ports: dict[str, int] = {}
        self._commands: dict[str, list[str]] = {}

    # ---- public API -------------------------------------------------------------------------
    @property
    def node_names(self) -> list[str]:
        return [m["metadata"]["name"] for m in self.node_manifests]

    def start(self, timeout: float = 180.0) -> "LabCluster":
        if self.running():
            raise LabError(f"lab cluster {self.name!r} is already running ({self.dir}); stop it first")
        prune_stale()
        bin_dir = bins.ensure_bins()
        for attempt in range(1, START_ATTEMPTS + 1):
            _OWNED.add(self)
            shutil.rmtree(self.dir, ignore_errors=True)
            try:
                self._launch(bin_dir)
                self._wait_ready(time.monotonic() + timeout)
                break
            except LabError as err:
                self.stop(keep_logs=True)
                if not any(t in str(err) for t in TRANSIENT) or attempt == START_ATTEMPTS:
                    raise
                print(f"lab {self.name}: start attempt {attempt} failed, retrying: {err}", file=sys.stderr)
            except BaseException:
                self.stop(keep_logs=True)
                raise
        if not self.tie_to_parent:
            _OWNED.discard(self)  # detached (CLI): outlives this process once started
        return self

    def stop(self, keep_logs: bool = False) -> None:
        """Kill every component (process groups) and remove the state dir (logs kept on failure)."""
        _OWNED.discard(self)
        if not self._procs:
            self._procs = self._read_state().get("procs", {})
        processes.stop_all({p["pid"]: p["exe"] for p in self._procs.values()})
        self._procs = {}
        if keep_logs or os.environ.get("TF_LAB_KEEP"):
            shutil.rmtree(self.dir / "etcd", ignore_errors=True)
            self.state_path.unlink(missing_ok=True)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    def running(self) -> bool:
        return any(c["alive"] for c in self.status()["components"].values())

    def status(self) -> dict:
        """Server, kubeconfig and, per component: pid, alive, RSS in bytes (reads the state file)."""
        state = self._read_state()
        if not state:
            return {"name": self.name, "running": False, "components": {}}
        components = {}
        for component, proc in state["procs"].items():
            alive = processes.alive(proc["pid"], proc["exe"])
            rss = processes.rss_bytes(proc["pid"]) if alive else 0
            components[component] = {"pid": proc["pid"], "alive": alive, "rss_bytes": rss}
        return {
            "name": self.name,
            "profile": state["profile"],
            "server": state["server"],
            "kubeconfig": state["kubeconfig"],
            "running": all(c["alive"] for c in components.values()),
            "rss_bytes_total": sum(c["rss_bytes"] for c in components.values()),
            "components": components,
        }

    def env(self) -> dict[str, str]:
        """Environment for kubectl and kubernetes.core/tokenfactory.spark modules to reach this cluster."""
        return {"KUBECONFIG": str(self.kubeconfig), "K8S_AUTH_KUBECONFIG": str(self.kubeconfig)}

    def _read_state(self) -> dict:
        """The state file, or {} when absent (never started, stopped, or removed by a concurrent prune)."""
        try:
            return json.loads(self.state_path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    def api_client(self):
        """A kubernetes.client.ApiClient authenticated as cluster admin."""
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig))

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop(keep_logs=exc[0] is not None)

    # ---- start-up ----------------------------------------------------------------------------
    def _launch(self, bin_dir: pathlib.Path) -> None:
        self.dir.mkdir(parents=True)
        (self.dir / "logs").mkdir()
        certs = pki.generate(self.dir / "pki")
        port = {k: processes.free_port() for k in ("etcd", "etcd-peer", "apiserver", "cm", "scheduler", "kwok")}
        self.server = f"https://127.0.0.1:{port['apiserver']}"
        configs = {
            who: kubeconfig.write(
                self.dir / f"{who}.kubeconfig",
                name=f"lab-{self.name}",
                server=self.server,
                ca=certs["ca.crt"],
                cert=certs[f"{who}.crt"],
                key=certs[f"{who}.key"],
            )
            for who in pki.CLIENTS
        }
        stages = sorted(bins.kwok_stage_dir().glob("*.yaml"))
        (self.dir / "kwok.yaml").write_text("\n---\n".join(s.read_text() for s in stages))
        serving = [f"--tls-cert-file={certs['apiserver.crt']}", f"--tls-private-key-file={certs['apiserver.key']}"]
        etcd_url = f"http://127.0.0.1:{port['etcd']}"
        peer_url = f"http://127.0.0.1:{port['etcd-peer']}"
        commands = {
            "etcd": [
                "--name=lab",
                f"--data-dir={self.dir / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=lab={peer_url}",
                "--unsafe-no-fsync=true",  # throwaway data: skip fsync, much faster on shared disks
                "--log-level=warn",
            ],
            "kube-apiserver": [
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                "--endpoint-reconciler-type=none",  # Endpoints reject loopback; nothing in the lab dials it
                f"--secure-port={port['apiserver']}",
                *serving,
                f"--client-ca-file={certs['ca.crt']}",
                f"--requestheader-client-ca-file={certs['ca.crt']}",
                "--requestheader-allowed-names=front-proxy-client",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={certs['front-proxy.crt']}",
                f"--proxy-client-key-file={certs['front-proxy.key']}",
                f"--service-account-key-file={certs['sa.pub']}",
                f"--service-account-signing-key-file={certs['sa.key']}",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--authorization-mode=Node,RBAC",
                "--allow-privileged=true",
                f"--cert-dir={self.dir / 'apiserver-certs'}",
                "--profiling=false",
            ],
            "kube-controller-manager": [
                *_component_auth(configs["controller-manager"]),
                f"--secure-port={port['cm']}",
                *serving,
                f"--root-ca-file={certs['ca.crt']}",
                f"--service-account-private-key-file={certs['sa.key']}",
                f"--cluster-signing-cert-file={certs['ca.crt']}",
                f"--cluster-signing-key-file={certs['ca.key']}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--use-service-account-credentials=true",  # each controller with its own RBAC role
                "--node-monitor-grace-period=2m",  # kwok heartbeats can lag on a loaded 2-core host
            ],
            "kube-scheduler": [
                *_component_auth(configs["scheduler"]),
                f"--secure-port={port['scheduler']}",
                *serving,
            ],
            "kwok": [
                f"--kubeconfig={configs['kwok']}",
                f"--config={self.dir / 'kwok.yaml'}",
                "--manage-nodes-with-annotation-selector="
                + ",".join(f"{k}={v}" for k, v in nodes.KWOK_ANNOTATION.items()),
                f"--server-address=127.0.0.1:{port['kwok']}",
                f"--node-port={port['kwok']}",
                f"--cidr={POD_CIDR}",
                f"--node-lease-duration-seconds={NODE_LEASE_SECONDS}",
                *serving,
            ],
        }
        self._commands = {component: [str(bin_dir / component), *args] for component, args in commands.items()}
        self._ports = port
        self._spawn("etcd", "kube-apiserver")

    def _spawn(self, *components: str) -> None:
        for component in components:
            argv = self._commands[component]
            pid = processes.spawn(argv, self.dir / "logs" / f"{component}.log", tie_to_parent=self.tie_to_parent)
            self._procs[component] = {"pid": pid, "exe": argv[0]}
            self._save_state()

    def _save_state(self) -> None:
        state = {
            "name": self.name,
            "profile": self.profile,
            "server": self.server,
            "kubeconfig": str(self.kubeconfig),
            "ports": self._ports,
            "procs": self._procs,
        }
        partial = self.state_path.with_suffix(".tmp")
        partial.write_text(json.dumps(state, indent=2))
        partial.replace(self.state_path)  # atomic: readers never see half a file

    def _wait_ready(self, deadline: float) -> None:
        ca = self.dir / "pki" / "ca.crt"
        ctx = ssl.create_default_context(cafile=str(ca))
        ctx.load_cert_chain(self.dir / "pki" / "admin.crt", self.dir / "pki" / "admin.key")
        self._poll(deadline, "kube-apiserver /readyz", lambda: _https_ok(f"{self.server}/readyz", ctx))
        # Components start once RBAC is bootstrapped: they read kube-system config at start-up.
        self._spawn("kube-controller-manager", "kube-scheduler", "kwok")
        from kubernetes import client

        with self.api_client() as api:
            core = client.CoreV1Api(api)
            for manifest in self.node_manifests:
                core.create_node(manifest)
                core.patch_node_status(manifest["metadata"]["name"], {"status": manifest["status"]})
            self._poll(deadline, "nodes Ready (kwok)", lambda: _nodes_ready(core, self.node_names))
            self._poll(deadline, "default ServiceAccount (controller-manager)", lambda: _default_sa(core))
        for component, key in (("kube-controller-manager", "cm"), ("kube-scheduler", "scheduler")):
            url = f"https://127.0.0.1:{self._ports[key]}/healthz"
            self._poll(deadline, f"{component} /healthz", lambda url=url: _https_ok(url, ctx))

    def _poll(self, deadline: float, what: str, check) -> None:
        while True:
            self._fail_if_exited(what)
            with contextlib.suppress(Exception):
                if check():
                    return
            if time.monotonic() > deadline:
                raise LabError(f"lab {self.name}: timed out waiting for {what}\n{self._log_tails()}")
            time.sleep(0.2)

    def _fail_if_exited(self, what: str) -> None:
        dead = {c: p["pid"] for c, p in self._procs.items() if not processes.alive(p["pid"], p["exe"])}
        if dead:
            how = ", ".join(f"{c} ({processes.exit_status(pid)})" for c, pid in dead.items())
            raise LabError(
                f"lab {self.name}: {how} exited while waiting for {what}; "
                f"MemAvailable {processes.mem_available_mib()} MiB\n{self._log_tails(dead)}"
            )

    def _log_tails(self, components=None, lines: int = 15) -> str:
        out = []
        for component in components or self._procs:
            log = self.dir / "logs" / f"{component}.log"
            tail = log.read_text(errors="replace").splitlines()[-lines:] if log.is_file() else []
            out.append(f"--- {log}\n" + "\n".join(tail))
        return "\n".join(out)


def prune_stale() -> None:
    """Remove clusters left by test processes that died (their components died with them: PDEATHSIG)."""
    for state_dir in lab_root().glob("pytest-*"):
        owner_pid = state_dir.name.split("-")[1]
        if owner_pid.isdigit() and not pathlib.Path(f"/proc/{owner_pid}").exists():
            LabCluster(name=state_dir.name).stop()


def _component_auth(config: pathlib.Path) -> list[str]:
    return [
        f"--kubeconfig={config}",
        f"--authentication-kubeconfig={config}",
        f"--authorization-kubeconfig={config}",
        "--bind-address=127.0.0.1",
        "--leader-elect=false",
    ]


def _https_ok(url: str, ctx: ssl.SSLContext) -> bool:
    with urllib.request.urlopen(url, context=ctx, timeout=5) as response:  # noqa: S310 (https to our loopback)
        return response.status == 200


def _nodes_ready(core, names: list[str]) -> bool:
    ready = {
        n.metadata.name
        for n in core.list_node().items
        if any(c.type == "Ready" and c.status == "True" for c in (n.status.conditions or []))
    }
    return set(names) <= ready


def _default_sa(core) -> bool:
    core.read_namespaced_service_account("default", "default")
    return True


# ---- teardown at exit or SIGTERM of clusters tied to this process (and of any still starting) ------
_OWNED: set[LabCluster] = set()


def _stop_owned() -> None:
    for cluster in list(_OWNED):
        cluster.stop()


def _on_sigterm(signum, frame):
    _stop_owned()
    signal.signal(signum, _previous_sigterm)
    os.kill(os.getpid(), signum)


atexit.register(_stop_owned)
_previous_sigterm = signal.getsignal(signal.SIGTERM)
if _previous_sigterm in (signal.SIG_DFL, None):
    _previous_sigterm = signal.SIG_DFL
    with contextlib.suppress(ValueError):  # not the main thread: rely on atexit and PDEATHSIG
        signal.signal(signal.SIGTERM, _on_sigterm)
