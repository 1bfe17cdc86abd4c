# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""asyncio event loop whose selector serves the load generator's plain-TCP streams itself (Linux, epoll).

A streamed token costs one socket read; through a stock loop each read also costs a full loop iteration
(timer heap, selector bookkeeping, handle dispatch), more Python than the read and its parsing together.
`StreamSelector` keeps the stream sockets in its own epoll, next to the loop's selector (an epoll fd is
itself pollable), and runs a readable stream's callback inside `select()`: asyncio only gets control back
when one of its own file descriptors is ready, when a callback completed a request (`wake()`), or when the
timeout it asked for (its next timer) has passed. What is measured does not change: a chunk is still
stamped right after the read that delivered it.

`run(coroutine)` is `asyncio.run` on such a loop; where epoll is missing it is `asyncio.run`, and the
HTTP client falls back to `loop.add_reader`.
"""

from __future__ import annotations

import asyncio
import selectors
import time

EPOLL = hasattr(selectors, "EpollSelector")


if EPOLL:
    import select

    class StreamSelector(selectors.EpollSelector):
        """EpollSelector plus inline-served stream sockets (`add_stream` / `remove_stream`)."""

        def __init__(self):
            super().__init__()
            self._streams = select.epoll()
            self._callbacks = {}
            self._own_fd = self.fileno()
            self._streams.register(self._own_fd, select.EPOLLIN)  # readable: asyncio's own fds have events
            self._wake = False

        def add_stream(self, fd, callback):
            self._callbacks[fd] = callback
            self._streams.register(fd, select.EPOLLIN)

        def remove_stream(self, fd):
            if self._callbacks.pop(fd, None) is not None:
                self._streams.unregister(fd)

        def wake(self):
            """A stream callback scheduled work for asyncio (e.g. completed a future): return from select()."""
            self._wake = True

        def select(self, timeout=None):
            if not self._callbacks:
                return super().select(timeout)
            poll, callbacks = self._streams.poll, self._callbacks
            wait = -1 if timeout is None else max(timeout, 0.0)
            deadline = None if timeout is None else time.monotonic() + wait
            while True:
                theirs = False
                for fd, _events in poll(wait):
                    callback = callbacks.get(fd)
                    if callback is None:
                        theirs = True
                    else:
                        callback()
                if theirs or self._wake or wait == 0:
                    self._wake = False
                    return super().select(0) if theirs else []
                if deadline is not None:
                    wait = deadline - time.monotonic()
                    if wait <= 0:
                        return []

        def close(self):
            self._streams.close()
            super().close()


class StreamLoop(asyncio.SelectorEventLoop):
    """SelectorEventLoop on a StreamSelector; `streams` is that selector (None without epoll)."""

    def __init__(self):
        self.streams = StreamSelector() if EPOLL else None
        super().__init__(self.streams)


def run(coroutine):
    """asyncio.run(coroutine) on a StreamLoop: same clean-up (cancel leftovers, async generators, executor)."""
    loop = StreamLoop()
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(coroutine)
    finally:
        try:
            _cancel_all(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def _cancel_all(loop):
    tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
