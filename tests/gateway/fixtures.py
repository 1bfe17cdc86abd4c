"""Gateway fixtures: real PostgreSQL and Redis (Debian binaries) and gateway processes."""

from __future__ import annotations

import pytest

FAULT_FIGURES = pytest.StashKey[list]()

from tests.engine.synthetic import SyntheticUpstream

from .gateway import Gateway
from lab.datastores import PostgresServer, RedisServer


@pytest.fixture(scope="session")
def postgres_server():
    server = PostgresServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_server():
    server = RedisServer().start()
    yield server
    server.stop()


@pytest.fixture
def upstream():
    """The deterministic synthetic engine (tests/engine/synthetic.py) serving tiny-qwen2, 8 output tokens."""
    with SyntheticUpstream(model="tiny-qwen2", output_tokens=8) as up:
        yield up


@pytest.fixture
def gateway_factory(postgres_server, redis_server):
    """gateway_factory(objects, replicas=1, **settings) -> Gateway with fresh database and Redis prefix."""
    started = []

    def make(objects, replicas=1, **settings) -> Gateway:
        gateway = Gateway(postgres_server, redis_server, objects, **settings)
        started.append(gateway)
        for _replica in range(replicas):
            gateway.add_replica()
        return gateway

    yield make
    for gateway in started:
        gateway.stop()


def pytest_terminal_summary(terminalreporter, config):
    """Print the fault-injection figures (tests/gateway/test_gateway_fault_injection.py) at the end of the run."""
    for figures in config.stash.get(FAULT_FIGURES, []):
        terminalreporter.section("gateway fault injection: figures")
        for name, value in figures.items():
            if name == "revocations":
                for row in value:
                    terminalreporter.write_line(f"  revocation {row}")
            else:
                terminalreporter.write_line(f"  {name}: {value}")
