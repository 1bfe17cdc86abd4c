"""How the gateway process itself is doing: garbage-collector pauses and event-loop lag, as metrics.

Both delay every stream at once, so they are what the tail latency is made of when the gateway is not short of
CPU: a collection stops the loop (measured in CPU time of the collecting thread, so other load on the machine
does not inflate it); lag is how late a timer due "now" actually ran (the loop was busy elsewhere, or the process
was not scheduled: wall time). `TF_GATEWAY_TRACE_SLOW_CALLBACKS_MS` (diagnosis only: asyncio debug mode costs
CPU) also logs each event-loop callback that ran longer than that, naming it.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import time

LOG = logging.getLogger("tokenfactory_gateway.runtime")
TRACE_ENV = "TF_GATEWAY_TRACE_SLOW_CALLBACKS_MS"


class RuntimeProbe:
    def __init__(self, metrics, interval: float, young_threshold: int = 50_000):
        self.metrics, self.interval, self.young_threshold = metrics, interval, young_threshold
        self._gc_started = 0.0
        self._task = None

    def start(self) -> None:
        """Called once the process has started up (imports, routing table): what exists now is frozen, so
        collections never traverse it again."""
        _first, *older = gc.get_threshold()
        gc.set_threshold(self.young_threshold, *older)
        gc.freeze()
        gc.callbacks.append(self._on_gc)
        if self.interval:
            self._task = asyncio.create_task(self._watch_lag())
        trace = os.environ.get(TRACE_ENV)
        if trace:
            loop = asyncio.get_running_loop()
            loop.set_debug(True)
            loop.slow_callback_duration = float(trace) / 1000
            LOG.warning("tracing event-loop callbacks slower than %s ms (asyncio debug mode: diagnosis only)", trace)

    def stop(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        if self._task:
            self._task.cancel()

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_started = time.thread_time()
        else:
            self.metrics.gc_pause.labels(str(info["generation"])).observe(time.thread_time() - self._gc_started)

    async def _watch_lag(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + self.interval
            await asyncio.sleep(self.interval)
            self.metrics.loop_lag.observe(max(0.0, loop.time() - due))
