"""A gateway started before its datastores answer (the pod beside PostgreSQL and Redis in one rollout, a Service
address routed to something else until kube-proxy catches up): it waits for them, then serves; past
`startup_wait_seconds` it exits naming the store, and a refusal (a missing database) fails at once."""

import contextlib
import os
import pathlib
import socket
import threading
import time

import pytest

from lab.datastores import PostgresServer, RedisServer
from lab.processes import process_tree
from lab.wait import ProcessDied
from tests.gateway.gateway import Gateway, deployment_objects

pytestmark = [pytest.mark.gateway, pytest.mark.slow]
MODEL = "tiny-qwen2"


class HttpSquatter:
    """Answers every connection on a datastore's port with an HTTP error, as an egress proxy answers a Service
    address that is not routed yet (the gateway's Redis client sees 'Protocol error, got "H"')."""

    def __init__(self, port):
        self.sock = socket.create_server(("127.0.0.1", port), reuse_port=False)
        self.sock.settimeout(0.2)
        self.running = True
        self.answered = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while self.running:
            try:
                conn, _addr = self.sock.accept()
            except TimeoutError:
                continue
            with conn:
                conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
                self.answered += 1

    def close(self):
        self.running = False
        self.thread.join(5)
        self.sock.close()


@contextlib.contextmanager
def own_stores():
    postgres, redis = PostgresServer().start(), RedisServer().start()
    try:
        yield postgres, redis
    finally:
        postgres.stop()
        redis.stop()


def test_start_up_waits_for_postgres_and_redis_then_serves(upstream):
    with own_stores() as (postgres, redis):
        gw = Gateway(postgres, redis, deployment_objects("tiny", MODEL, upstream.base_url))
        postgres.halt()
        redis.halt()
        squatter = HttpSquatter(redis.port)

        def bring_back():
            time.sleep(3)
            postgres.start()
            time.sleep(3)  # the gateway now meets the squatter on Redis's port
            squatter.close()
            redis.start()

        helper = threading.Thread(target=bring_back)
        started = time.monotonic()
        helper.start()
        try:
            gw.add_replica(timeout=45)
            took = time.monotonic() - started
            key = gw.create_key("acme", "k1", models=[MODEL])
            status, models = gw.replicas[0].request("GET", "/v1/models", token=key)
            assert status == 200, models
            assert [m["id"] for m in models["data"]] == [MODEL]
            log = gw.logs()
            assert "waiting for PostgreSQL" in log, log
            assert "waiting for Redis" in log and "Protocol error" in log, log
            assert squatter.answered >= 1
            assert 6 <= took < 25, f"ready {took:.1f} s after start"
        finally:
            helper.join()
            gw.stop()


def test_start_up_gives_up_naming_the_store_after_the_wait(upstream):
    with own_stores() as (postgres, redis):
        gw = Gateway(postgres, redis, deployment_objects("tiny", MODEL, upstream.base_url), startup_wait_seconds=2)
        postgres.halt()
        started = time.monotonic()
        try:
            with pytest.raises(ProcessDied, match=r"PostgreSQL did not answer within 2 s \(startup_wait_seconds\)"):
                gw.add_replica(timeout=30)
            assert time.monotonic() - started < 15
        finally:
            gw.stop()


def test_a_refused_connection_fails_at_once(upstream, postgres_server, redis_server):
    """A server that answers and refuses (here: no such database) is no reason to wait."""
    gw = Gateway(postgres_server, redis_server, deployment_objects("tiny", MODEL, upstream.base_url))
    gw.database = "no_such_database"
    started = time.monotonic()
    try:
        with pytest.raises(ProcessDied, match=r'InvalidCatalogNameError: database "no_such_database" does not exist'):
            gw.add_replica(timeout=30)
        assert time.monotonic() - started < 10
        assert "waiting for PostgreSQL" not in gw.logs()
    finally:
        gw.stop()


def test_a_replica_not_ready_in_time_is_not_left_running(upstream):
    """The harness's own promise: a start that times out kills the gateway it started (a leaked one kept running
    for the rest of a `make test` once, holding its ports and a database)."""
    with own_stores() as (postgres, redis):
        gw = Gateway(postgres, redis, deployment_objects("tiny", MODEL, upstream.base_url), startup_wait_seconds=300)
        postgres.halt()  # the gateway waits for it, never ready
        try:
            with pytest.raises(TimeoutError):
                gw.add_replica(timeout=3)
            leftover = [pid for pid in process_tree(os.getpid()) if str(gw.dir) in command_line(pid)]
            assert leftover == [], leftover
        finally:
            gw.stop()


def command_line(pid):
    with contextlib.suppress(OSError):
        return pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    return ""
