"""CLI: python -m lab up|down|status [--profile P] [--name N].

`up` starts a detached cluster and prints its admin kubeconfig path on stdout (progress goes to stderr).
"""

import argparse
import json
import sys
import time

from lab.k8s import nodes
from lab.k8s.cluster import LabCluster, LabError


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("up", "down", "status"))
    parser.add_argument("--profile", default="spark-single", choices=nodes.profiles())
    parser.add_argument("--name", help="cluster name (default: the profile); state in $TF_LAB_ROOT/<name>")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for a healthy cluster")
    args = parser.parse_args(argv)
    cluster = LabCluster(args.profile, args.name, tie_to_parent=False)
    try:
        if args.action == "up":
            started = time.monotonic()
            cluster.start(timeout=args.timeout)
            print(f"lab {cluster.name}: {cluster.server} ready in {time.monotonic() - started:.1f} s", file=sys.stderr)
            print(cluster.kubeconfig)
        elif args.action == "down":
            cluster.stop()
        else:
            status = cluster.status()
            print(json.dumps(status, indent=2))
            return 0 if status["running"] else 3
    except LabError as err:
        print(err, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
