"""Polling helper for tests against the lab cluster (controllers converge asynchronously)."""

import time


def wait_until(check, *, timeout: float = 60.0, interval: float = 0.25, what: str = "condition"):
    """Call check() until it returns a truthy value (returned); AssertionError naming `what` on timeout."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = check()
        except Exception as err:  # transient API errors while things converge
            last = err
        else:
            if last:
                return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last result: {last!r}")
        time.sleep(interval)
