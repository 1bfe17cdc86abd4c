"""Start-up against datastores that may not answer yet (a pod started beside its PostgreSQL and Redis, a Service
address not yet routed): retry what is transient, with backoff, up to a deadline; fail at once on anything else."""

from __future__ import annotations

import asyncio
import logging
import time

LOG = logging.getLogger("tokenfactory_gateway")
FIRST_PAUSE = 0.5
LONGEST_PAUSE = 5.0


class StoreNotAnswering(RuntimeError):
    """A datastore did not answer within the start-up wait."""


async def until_answering(what: str, attempt, transient: tuple, wait_seconds: float, permanent: tuple = ()):
    """The result of `await attempt()`, retried on `transient` errors (but not `permanent` ones, e.g. a refused
    password) until `wait_seconds` have passed."""
    deadline = time.monotonic() + wait_seconds
    pause = FIRST_PAUSE
    while True:
        try:
            return await attempt()
        except transient as exc:
            if isinstance(exc, permanent):
                raise
            left = deadline - time.monotonic()
            if left <= 0:
                raise StoreNotAnswering(
                    f"{what} did not answer within {wait_seconds:g} s (startup_wait_seconds): {type(exc).__name__}: "
                    f"{exc}"
                ) from exc
            LOG.warning("waiting for %s (%.0f s left): %s: %s", what, left, type(exc).__name__, exc)
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 2, LONGEST_PAUSE)
