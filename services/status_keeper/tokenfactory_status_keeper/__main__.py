"""`python -m tokenfactory_status_keeper [--interval S] [--namespace NS] [--endpoint NS/NAME --tls-copy NS/NAME]
[--once]`: the status keeper (the gateway role's Deployment <gateway_name>-status-keeper runs it from the gateway
image). With --endpoint and --tls-copy (TF_STATUS_KEEPER_ENDPOINT, TF_STATUS_KEEPER_TLS_COPY) it also keeps the
gateway's copy of that Endpoint's TLS Secret in step with it (tls_copy.py); without them it does not."""

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
from .tls_copy import TlsCopy, parse_ref

DEFAULT_INTERVAL = 10.0


def positive(value):
    number = float(value)
    if number <= 0:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number of seconds")
    return number


def reference(value):
    try:
        return parse_ref(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def keeper(client, args):
    """The Keeper that args configure (with a TlsCopy when --endpoint and --tls-copy are given)."""
    tls_copy = TlsCopy(client, args.endpoint, args.tls_copy) if args.endpoint else None
    return Keeper(client, args.namespace, tls_copy=tls_copy)


def arguments(argv=None):
    """The command line (and the TF_STATUS_KEEPER_* variables), parsed; exits 2 when they do not fit."""
    parser = argparse.ArgumentParser(description="Keep ModelDeployment and Endpoint status current.")
    parser.add_argument(
        "--interval",
        type=positive,
        default=positive(os.environ.get("TF_STATUS_KEEPER_INTERVAL", DEFAULT_INTERVAL)),
        help="seconds between passes (TF_STATUS_KEEPER_INTERVAL, default %(default)s)",
    )
    parser.add_argument("--namespace", default=None, help="only this namespace (default: all)")
    parser.add_argument(
        "--endpoint",
        type=reference,
        default=os.environ.get("TF_STATUS_KEEPER_ENDPOINT") or None,
        metavar="NAMESPACE/NAME",
        help="the Endpoint the gateway serves, whose TLS Secret is kept copied (TF_STATUS_KEEPER_ENDPOINT)",
    )
    parser.add_argument(
        "--tls-copy",
        type=reference,
        default=os.environ.get("TF_STATUS_KEEPER_TLS_COPY") or None,
        metavar="NAMESPACE/NAME",
        help="the gateway's copy of that Secret, kept when it exists (TF_STATUS_KEEPER_TLS_COPY)",
    )
    parser.add_argument("--once", action="store_true", help="one pass, then exit")
    parser.add_argument("--log-level", default=os.environ.get("TF_STATUS_KEEPER_LOG_LEVEL", "INFO"))
    args = parser.parse_args(argv)
    if bool(args.endpoint) != bool(args.tls_copy):
        parser.error("--endpoint and --tls-copy (TF_STATUS_KEEPER_ENDPOINT, TF_STATUS_KEEPER_TLS_COPY) go together")
    return args


def main(argv=None):
    args = arguments(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(message)s")
    try:  # kubernetes.core's options from K8S_AUTH_* variables; none set: in a pod, its service account
        client = KubeClient({}, field_manager=MANAGED_BY, on_retry=LOG.info)
    except K8sError as exc:
        LOG.error("status keeper: %s", exc)
        return 1
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *unused: stop.set())
    tls = "TLS copy {}/{} of Endpoint {}/{}".format(*args.tls_copy, *args.endpoint) if args.endpoint else "no TLS copy"
    LOG.info("status keeper: every %ss, namespace %s, %s", args.interval, args.namespace or "(all)", tls)
    run(keeper(client, args), args.interval, stop, passes=1 if args.once else None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
