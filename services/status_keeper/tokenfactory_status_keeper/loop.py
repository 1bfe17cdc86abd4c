"""The keeper's loop: one pass every interval until stopped."""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import K8sError


def run(keeper, interval, stop, passes=None):
    """Passes every `interval` seconds until stop (a threading.Event) is set or `passes` passes ran; a pass that
    cannot list the objects is logged and retried at the next interval. Returns the number of passes."""
    done = 0
    while not stop.is_set() and (passes is None or done < passes):
        try:
            counts = keeper.run_pass()
            keeper.log.debug("pass %d: %s", done + 1, counts)
        except K8sError as exc:
            keeper.log.warning("pass %d failed: API error %s: %s", done + 1, exc.status, str(exc)[:300])
        done += 1
        if passes is None or done < passes:
            stop.wait(interval)
    return done
