"""`python -m tokenfactory_status_keeper [--interval S] [--namespace NS] [--once]`: the status keeper (the gateway
role's Deployment <gateway_name>-status-keeper runs it from the gateway image)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import K8sError, KubeClient
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.domain import MANAGED_BY

from .keeper import Keeper
from .logs import LOG
from .loop import run

DEFAULT_INTERVAL = 10.0


def positive(value):
    number = float(value)
    if number <= 0:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number of seconds")
    return number


def main(argv=None):
    parser = argparse.ArgumentParser(description="Keep ModelDeployment and Endpoint status current.")
    parser.add_argument(
        "--interval",
        type=positive,
        default=positive(os.environ.get("TF_STATUS_KEEPER_INTERVAL", DEFAULT_INTERVAL)),
        help="seconds between passes (TF_STATUS_KEEPER_INTERVAL, default %(default)s)",
    )
    parser.add_argument("--namespace", default=None, help="only this namespace (default: all)")
    parser.add_argument("--once", action="store_true", help="one pass, then exit")
    parser.add_argument("--log-level", default=os.environ.get("TF_STATUS_KEEPER_LOG_LEVEL", "INFO"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(message)s")
    try:  # kubernetes.core's options from K8S_AUTH_* variables; none set: in a pod, its service account
        client = KubeClient({}, field_manager=MANAGED_BY, on_retry=LOG.info)
    except K8sError as exc:
        LOG.error("status keeper: %s", exc)
        return 1
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *unused: stop.set())
    LOG.info("status keeper: every %ss, namespace %s", args.interval, args.namespace or "(all)")
    run(Keeper(client, args.namespace), args.interval, stop, passes=1 if args.once else None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
