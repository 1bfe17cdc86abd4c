# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Retries of transient API answers in one place: capped exponential backoff with full jitter, at least the
server's Retry-After (the pattern of amazon.aws module_utils/retries.py)."""

from __future__ import annotations

import random
import time

ATTEMPTS = 5
BASE_DELAY = 0.5  # seconds before the first retry, doubled each time (randomised, "full jitter")
MAX_DELAY = 8.0


class RetryableError(Exception):
    """Wraps an error worth retrying; retry_after is the server's Retry-After header (seconds), if any."""

    def __init__(self, error, retry_after=None):
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


def backoff(attempts=ATTEMPTS, base=BASE_DELAY, cap=MAX_DELAY):
    """The pauses between attempts: random in [0, min(cap, base * 2**n)]."""
    for attempt in range(attempts - 1):
        yield random.uniform(0, min(cap, base * 2**attempt))  # noqa: S311 - jitter, not cryptography


def _seconds(retry_after):
    try:
        return max(float(retry_after), 0.0)
    except (TypeError, ValueError):
        return 0.0


def with_retries(call, describe, on_retry=None, attempts=ATTEMPTS, base=BASE_DELAY, cap=MAX_DELAY, sleep=time.sleep):
    """call() until it returns; a RetryableError is retried up to `attempts` times in all, then its error raised."""
    pauses = backoff(attempts, base, cap)
    while True:
        try:
            return call()
        except RetryableError as exc:
            pause = next(pauses, None)
            if pause is None:
                raise exc.error from None
            pause = min(max(pause, _seconds(exc.retry_after)), cap)
            if on_retry is not None:
                on_retry(f"{describe}: {getattr(exc.error, 'status', '')} {exc.error}; retrying in {pause:.1f}s")
            sleep(pause)
