"""`python -m tokenfactory_gateway --config FILE` (settings may also come from TF_GATEWAY_* variables)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from . import config
from .server import serve


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="tokenfactory-gateway", description=__doc__)
    parser.add_argument("--config", help="YAML settings file")
    args = parser.parse_args(argv)
    try:
        cfg = config.load(args.config)
    except (OSError, ValueError) as exc:
        print(f"tokenfactory-gateway: configuration error: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=cfg.log_level, format="%(message)s", stream=sys.stdout)
    try:
        import uvloop
    except ImportError:  # uvloop is optional (pure asyncio works, a bit slower)
        return asyncio.run(serve(cfg))
    return uvloop.run(serve(cfg))


if __name__ == "__main__":
    sys.exit(main())
