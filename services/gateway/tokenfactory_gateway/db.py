"""PostgreSQL access with bounded waits: an outage or a hung server becomes a 503, never a hanging request."""

from __future__ import annotations

import asyncio
import functools

import asyncpg

from . import errors

# What "the database is not answering" looks like: refused or dropped connections, timeouts, a server starting
# or shutting down, too many connections, a pooled connection left mid-operation by a timed-out call.
UNAVAILABLE = (
    OSError,
    TimeoutError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.exceptions.InsufficientResourcesError,
)


async def create_pool(dsn: str, timeout: float):
    """Every connect and statement of the pool is bounded by `timeout` (and its cancellation too)."""
    return await asyncpg.create_pool(dsn, min_size=2, max_size=10, timeout=timeout, command_timeout=timeout)


async def bounded(awaitable, timeout: float):
    """Await a data-layer call, bounded (x3: acquire, statements, release); unavailable database -> 503."""
    try:
        async with asyncio.timeout(timeout * 3):
            return await awaitable
    except UNAVAILABLE:
        raise errors.database_unavailable() from None


def guarded(timeout_attr: str = "timeout"):
    """Decorate an async data-layer method: `bounded` by self.<timeout_attr>."""

    def decorate(func):
        @functools.wraps(func)
        async def wrapper(self, *args, **kwargs):
            return await bounded(func(self, *args, **kwargs), getattr(self, timeout_attr))

        return wrapper

    return decorate
