"""Push invalidation of the per-replica key caches (Redis pub/sub with acknowledgements).

Admin changes that take rights away increment the auth epoch and publish it. Every replica listens, flushes its
key cache and acknowledges the epoch in a registry entry that is also its heartbeat (TTL REGISTRY_TTL_SECONDS);
the admin call returns once every registered replica acknowledged, or its entry expired. A replica is `live`
(trusts its cache without asking Redis) only until LIVE_SECONDS after its last heartbeat was sent, which is
before its registry entry can expire; otherwise it checks the epoch in Redis on every request (pull) and fails
closed when Redis is unreachable. So once an admin call succeeded, no replica serves from an old cache.

The epoch is never reset: a Redis that comes back empty gets a new epoch from its clock (microseconds), which
no replica holds, so every replica flushes on its first contact with it.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

LOG = logging.getLogger("tokenfactory_gateway.auth")
HEARTBEAT_SECONDS = 1.0
LIVE_SECONDS = 3.0
REGISTRY_TTL_SECONDS = 6
ACK_TIMEOUT_SECONDS = REGISTRY_TTL_SECONDS + 1.0

# Lua: the current epoch; a missing one (Redis restarted empty) becomes Redis' clock in microseconds.
SEED_EPOCH = """
local epoch = redis.call('GET', KEYS[1])
if not epoch then
  local clock = redis.call('TIME')
  epoch = clock[1] .. string.format('%06d', tonumber(clock[2]))
  redis.call('SET', KEYS[1], epoch)
end
"""
EPOCH_LUA = SEED_EPOCH + "return epoch"
BUMP_LUA = SEED_EPOCH + "return redis.call('INCR', KEYS[1])"


class AuthInvalidation:
    def __init__(self, redis, prefix: str, keys):
        self.redis, self.keys = redis, keys
        self.epoch_key = f"{prefix}auth:epoch"
        self.channel = f"{prefix}auth:changes"
        self.registry = f"{prefix}auth:replica:"
        self.replica = uuid.uuid4().hex
        self._live_until = 0.0
        self._epoch = redis.register_script(EPOCH_LUA)
        self._bump = redis.register_script(BUMP_LUA)
        self._task = None

    @property
    def live(self) -> bool:
        return time.monotonic() < self._live_until

    async def start(self) -> None:
        self._task = asyncio.create_task(self._listen())

    async def stop(self) -> None:
        self._live_until = 0.0
        if self._task:
            self._task.cancel()
        try:
            await self.redis.delete(self.registry + self.replica)
        except Exception as exc:
            LOG.info("could not remove the replica registry entry: %s", exc)

    async def _listen(self) -> None:
        while True:
            pubsub = self.redis.pubsub()
            try:
                await pubsub.subscribe(self.channel)
                await self._heartbeat()  # after subscribing: no change can fall in between
                beat = time.monotonic() + HEARTBEAT_SECONDS
                while True:
                    wait = max(0.0, beat - time.monotonic())
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=wait)
                    if message:
                        await self._acknowledge(int(message["data"]))
                    if time.monotonic() >= beat:
                        await self._heartbeat()  # also heals a subscription that silently stopped delivering
                        beat = time.monotonic() + HEARTBEAT_SECONDS
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._live_until = 0.0
                LOG.error("auth invalidation channel down (%s); checking the epoch per request", exc)
                await asyncio.sleep(0.5)
            finally:
                self._live_until = 0.0
                await pubsub.aclose()

    async def _heartbeat(self) -> None:
        sent = time.monotonic()
        self.keys.observe_epoch(int(await self._epoch(keys=[self.epoch_key])))
        await self.redis.set(self.registry + self.replica, self.keys.epoch, ex=REGISTRY_TTL_SECONDS)
        self._live_until = sent + LIVE_SECONDS

    async def _acknowledge(self, epoch: int) -> None:
        self.keys.observe_epoch(epoch)
        await self.redis.set(self.registry + self.replica, self.keys.epoch, ex=REGISTRY_TTL_SECONDS)

    async def publish(self) -> bool:
        """Bump the epoch, announce it, wait until every registered replica flushed. Redis errors propagate;
        False only if a replica kept its registry entry fresh without acknowledging for ACK_TIMEOUT_SECONDS."""
        epoch = int(await self._bump(keys=[self.epoch_key]))
        await self.redis.publish(self.channel, epoch)
        deadline = time.monotonic() + ACK_TIMEOUT_SECONDS
        while True:
            names = [name async for name in self.redis.scan_iter(match=self.registry + "*", count=1000)]
            seen = await self.redis.mget(names) if names else []
            if all(value is None or int(value) >= epoch for value in seen):
                return True
            if time.monotonic() > deadline:
                LOG.error("auth epoch %s not acknowledged by every replica within %s s", epoch, ACK_TIMEOUT_SECONDS)
                return False
            await asyncio.sleep(0.005)
