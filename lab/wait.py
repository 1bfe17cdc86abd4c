"""The one polling helper of the lab and the tests: controllers and processes converge asynchronously."""

import time


class ProcessDied(RuntimeError):
    """Raised by a check when the process it waits for has exited: stop waiting at once."""


def wait_until(check, timeout: float = 60.0, what: str = "condition", *, interval: float = 0.1):
    """Call check() until it returns a truthy value, which is returned.

    An exception from check() counts as "not yet" (transient API errors while things converge) and is
    reported on timeout, except ProcessDied, which ends the wait. TimeoutError names `what`.
    """
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = check()
        except ProcessDied:
            raise
        except Exception as err:  # not there yet; reported on timeout
            last = err
        else:
            if last:
                return last
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}; last result: {last!r}")
        time.sleep(interval)
