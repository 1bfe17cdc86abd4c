"""Push invalidation of the per-replica key caches (Redis pub/sub with acknowledgements).

Admin changes that take rights away increment the auth epoch and publish it. Every replica listens,
flushes its key cache, and acknowledges the epoch in a registry entry that also serves as its heartbeat.
The admin call returns only when every live replica has acknowledged, so the next request anywhere is
checked against the database. While its subscription is down a replica is not `live`, and it checks
the epoch in Redis on every request instead (pull), failing closed if Redis is unreachable.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

LOG = logging.getLogger("tokenfactory_gateway.auth")
HEARTBEAT_SECONDS = 2.0
REGISTRY_TTL_SECONDS = 6
ACK_TIMEOUT_SECONDS = 5.0


class AuthInvalidation:
    def __init__(self, redis, prefix: str, keys):
        self.redis, self.keys = redis, keys
        self.epoch_key = f"{prefix}auth:epoch"
        self.channel = f"{prefix}auth:changes"
        self.registry = f"{prefix}auth:replica:"
        self.replica = uuid.uuid4().hex
        self.live = False
        self._task = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._listen())

    async def stop(self) -> None:
        self.live = False
        if self._task:
            self._task.cancel()
        await self.redis.delete(self.registry + self.replica)

    async def _listen(self) -> None:
        while True:
            pubsub = self.redis.pubsub()
            try:
                await pubsub.subscribe(self.channel)
                await self._seen(int(await self.redis.get(self.epoch_key) or 0))  # after subscribing: no gap
                self.live = True
                while True:
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=HEARTBEAT_SECONDS)
                    await self._seen(int(message["data"]) if message else self.keys.epoch)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis gone: fall back to per-request epoch checks until it is back
                self.live = False
                LOG.error("auth invalidation channel down (%s); checking the epoch per request", exc)
                await asyncio.sleep(1)
            finally:
                self.live = False
                await pubsub.aclose()

    async def _seen(self, epoch: int) -> None:
        self.keys.observe_epoch(epoch)
        await self.redis.set(self.registry + self.replica, self.keys.epoch, ex=REGISTRY_TTL_SECONDS)

    async def publish(self) -> bool:
        """Bump the epoch, announce it, and wait until every live replica flushed; False on timeout."""
        epoch = await self.redis.incr(self.epoch_key)
        await self.redis.publish(self.channel, epoch)
        deadline = time.monotonic() + ACK_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            names = [name async for name in self.redis.scan_iter(match=self.registry + "*", count=1000)]
            seen = await self.redis.mget(names) if names else []
            if all(value is None or int(value) >= epoch for value in seen):
                return True
            await asyncio.sleep(0.005)
        LOG.error("auth epoch %s not acknowledged by every replica within %s s", epoch, ACK_TIMEOUT_SECONDS)
        return False
