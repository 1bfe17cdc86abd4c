"""Real PostgreSQL 15 and Redis processes from the Debian packages, on loopback, in temporary dirs."""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import socket
import subprocess
import tempfile

from lab.processes import free_port, signal_tree
from lab.wait import wait_until


def postgres_bin(lib=pathlib.Path("/usr/lib/postgresql")) -> pathlib.Path:
    """The newest installed server's bin dir: 15 on Debian 12, 16 on Ubuntu 24.04 / DGX OS 7."""
    installed = [p for p in lib.glob("*/bin") if p.parent.name.isdigit()]
    return max(installed, key=lambda p: int(p.parent.name), default=lib / "15/bin")


PG_BIN = postgres_bin()


def _as_postgres() -> dict:
    # PostgreSQL refuses to run as root; the Debian package provides the `postgres` account.
    return {"user": "postgres", "group": "postgres", "extra_groups": []} if os.geteuid() == 0 else {}


class PostgresServer:
    """A fresh server in a temporary dir on a free port, or (lab) a kept one in `directory` on `port`."""

    def __init__(self, directory=None, port=None):
        self.dir = pathlib.Path(directory) if directory else pathlib.Path(tempfile.mkdtemp(prefix="tf-pg-"))
        self.port = port or free_port()
        self.proc = None
        self._databases = 0

    def initdb(self):
        """Create the cluster's data directory unless it exists; returns the server's argv and Popen arguments."""
        self.dir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
        data = self.dir / "data"
        if not data.exists():
            subprocess.run(
                [PG_BIN / "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8"],
                check=True,
                capture_output=True,
                **_as_postgres(),
            )
        argv = [PG_BIN / "postgres", "-D", data, "-p", self.port, "-k", self.dir, "-c", "listen_addresses=127.0.0.1"]
        return [str(arg) for arg in argv], _as_postgres()

    def ready(self) -> bool:
        return self.psql("postgres", "SELECT 1") == "1"

    def start(self):
        argv, as_user = self.initdb()
        log = open(self.dir / "postgres.log", "ab")  # noqa: SIM115 - lives as long as the server
        self.proc = subprocess.Popen(argv, stdout=log, **as_user, stderr=subprocess.STDOUT)
        wait_until(self.ready, 30, "postgres")
        return self

    def start_frozen(self):
        """Start the server and freeze it as soon as its port accepts connections: clients connect, and hang."""
        argv, as_user = self.initdb()
        log = open(self.dir / "postgres.log", "ab")  # noqa: SIM115 - lives as long as the server
        self.proc = subprocess.Popen(argv, stdout=log, **as_user, stderr=subprocess.STDOUT)

        def listening():
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True

        wait_until(listening, 30, "postgres port", interval=0.002)
        self.freeze()
        return self

    def freeze(self):
        """SIGSTOP the server and its backends: connections stay open, nothing answers (a hung database)."""
        signal_tree(self.proc.pid, signal.SIGSTOP)

    def thaw(self):
        signal_tree(self.proc.pid, signal.SIGCONT)

    def psql(self, database: str, sql: str) -> str:
        out = subprocess.run(
            [PG_BIN / "psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", database, "-Atqc", sql],
            check=True,
            capture_output=True,
            text=True,
        )
        return out.stdout.strip()

    def create_database(self) -> str:
        self._databases += 1
        name = f"gw{self._databases}"
        self.psql("postgres", f"CREATE DATABASE {name}")
        return name

    def dsn(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def halt(self):
        """Stop the server but keep its data (start() brings it back)."""
        if self.proc and self.proc.poll() is None:
            self.thaw()  # a frozen server cannot shut down
            self.proc.send_signal(signal.SIGINT)  # "fast" shutdown: does not wait for clients to leave
            self.proc.wait(30)

    def stop(self):
        self.halt()
        shutil.rmtree(self.dir, ignore_errors=True)


class RedisServer:
    """A fresh server in a temporary dir on a free port, or (lab) a kept one in `directory` on `port`."""

    def __init__(self, directory=None, port=None):
        self.dir = pathlib.Path(directory) if directory else pathlib.Path(tempfile.mkdtemp(prefix="tf-redis-"))
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = None

    def command(self) -> list:
        self.dir.mkdir(parents=True, exist_ok=True)
        return ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", str(self.dir), "--logfile", str(self.dir / "redis.log")]  # fmt: skip

    def ready(self) -> bool:
        return self.cli("PING") == "PONG"

    def start(self):
        self.proc = subprocess.Popen(self.command())
        wait_until(self.ready, 15, "redis")
        return self

    def cli(self, *args) -> str:
        out = subprocess.run(
            ["redis-cli", "-p", str(self.port), *args], check=True, capture_output=True, text=True, timeout=10
        )
        return out.stdout.strip()

    def freeze(self):
        """SIGSTOP the server: connections stay open, nothing answers (a hung Redis)."""
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self):
        self.proc.send_signal(signal.SIGCONT)

    def halt(self):
        """Stop the server (start() brings it back, empty: it keeps no data)."""
        if self.proc and self.proc.poll() is None:
            self.thaw()  # a frozen server cannot shut down
            self.proc.terminate()
            self.proc.wait(15)

    def stop(self):
        self.halt()
        shutil.rmtree(self.dir, ignore_errors=True)
