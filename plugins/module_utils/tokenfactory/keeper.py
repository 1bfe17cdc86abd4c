# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""The keeper: reconciles ModelDeployments and keeps ModelDeployment and Endpoint `status` current between module runs.

Every interval it lists both kinds. A ModelDeployment whose spec generation is newer than its plan (status.plan,
planner.stored_plan), for example after a `kubectl apply` of a new replica count or engine argument, is planned and
its children applied by the module's own path (deployment_apply.DeploymentApply: the same references, plan, dry runs
and server-side apply with the collection's field manager, domain.MANAGED_BY, with the capacity options the last
plan was made with). A spec that cannot be planned (more GPUs than exist, a missing reference) writes nothing but
status: the old plan and its running pods stay, and status.refused names the generation and the reason.

Then it recomputes each object's status with the functions the modules use (status.py) and writes it only when it
differs from the stored one: a deployment whose engine pod starts crash-looping after it was Ready turns Failed, and
the gateway stops routing to it, without a module run.

A status write is a server-side apply of .status by the collection's field manager (as the modules write it) that
names the resourceVersion it was computed from: when a module (or another keeper) changed the object meanwhile, the
write fails with 409 and the object is looked at again on the next pass. The module and the keeper share that one
field manager and one code path, so they never fight: a module run on a spec the keeper already applied changes
nothing.

Run in the cluster by the gateway role (gateway_status_keeper), from the gateway image:
    python -m ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.keeper --interval 10
It authenticates as the modules do (kubernetes.core's options and K8S_AUTH_* variables); with none set, in a pod,
with the pod's service account token.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import K8sError, KubeClient
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.capacity import CapacityError
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.checks import ValidationError
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.deployment_apply import DeploymentApply
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.domain import MANAGED_BY, PENDING
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.kinds import (
    COMPUTE_CLUSTER,
    ENDPOINT,
    MODEL_DEPLOYMENT,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.objects import ObjectService
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.planner import is_current, stored_plan
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.status import (
    deployment_status,
    endpoint_status,
)

DEFAULT_INTERVAL = 10.0
LOG = logging.getLogger("tokenfactory.status_keeper")
# A Failed message ends with the container's last log lines: kept in the object's status, never in the keeper's log.
LOG_LINES_MARK = "; last log lines:"


def describe(rtype, obj):
    meta = obj["metadata"]
    return f"{rtype.kind} {meta['namespace']}/{meta['name']}"


def summary(status):
    """'<phase>, <ready>: <message>' of a status for the log, without the container's log lines."""
    if "readyReplicas" in status:
        ready = f"{status['readyReplicas']}/{status['replicas']} ready"
    elif "gatewayReadyPods" in status:
        ready = f"{status['gatewayReadyPods']} gateway pod(s) ready"
    else:
        ready = "not planned"
    message = (status.get("message") or "").split(LOG_LINES_MARK, 1)[0]
    return f"{status.get('phase', 'no phase')}, {ready}: {message}"


class KeeperRun:
    """What objects.ObjectService needs of a module run, for the keeper: its client, no check mode, the changes."""

    check_mode = False

    def __init__(self, client):
        self.client, self.changes = client, []

    def record(self, header, before, after):
        self.changes.append(header)


class Keeper:
    """One pass (run_pass) over every ModelDeployment and Endpoint (of one namespace, or all)."""

    def __init__(self, client, namespace=None, log=LOG):
        self.client, self.namespace, self.log = client, namespace, log
        self.skipped = {}  # describe(obj) -> why it was last left alone (logged once per reason)

    def run_pass(self):
        """{'checked', 'written', 'unchanged', 'skipped', 'conflicts', 'errors'} counts of one pass."""
        counts = dict.fromkeys(("checked", "written", "unchanged", "skipped", "conflicts", "errors"), 0)
        for rtype, compute in ((ENDPOINT, self.endpoint), (MODEL_DEPLOYMENT, self.deployment)):
            for obj in self.client.list(rtype, self.namespace):
                if obj["metadata"].get("deletionTimestamp"):
                    continue
                counts["checked"] += 1
                counts[self.keep(rtype, obj, compute)] += 1
        return counts

    def keep(self, rtype, obj, compute):
        """'written', 'unchanged', 'skipped', 'conflicts' or 'errors' for one object."""
        what = describe(rtype, obj)
        try:
            status, why = compute(obj)
            if status is None:
                if self.skipped.get(what) != why:
                    self.log.info("%s: left alone: %s", what, why)
                self.skipped[what] = why
                return "skipped"
            self.skipped.pop(what, None)
            stored = obj.get("status") or {}
            if status == stored:
                return "unchanged"
            self.write(rtype, obj, status)
        except K8sError as exc:
            if exc.status == 409:
                self.log.info("%s changed while its status was computed; next pass", what)
                return "conflicts"
            self.log.warning("%s: status not kept: API error %s: %s", what, exc.status, str(exc)[:300])
            return "errors"
        except (KeyError, TypeError, ValueError) as exc:  # an object this version cannot read: the others go on
            self.log.warning("%s: status not kept: unexpected content (%s: %s)", what, type(exc).__name__, exc)
            return "errors"
        self.log.info("%s: %s -> %s", what, stored.get("phase", "no phase"), summary(status))
        return "written"

    def write(self, rtype, obj, status):
        """Server-side apply of .status as the modules write it, only onto the version it was computed from."""
        meta = obj["metadata"]
        body = {
            "apiVersion": rtype.api_version,
            "kind": rtype.kind,
            "metadata": {
                "name": meta["name"],
                "namespace": meta["namespace"],
                "resourceVersion": meta["resourceVersion"],
            },
            "status": status,
        }
        self.client.apply(body, subresource="status", conflict=False)

    def deployment(self, md):
        """(status, None) as model_deployment computes it, or (None, why not); plans and applies the children
        first when the spec is newer than the plan."""
        plan, refused = stored_plan(md), None
        if not is_current(md):
            plan, refused = self.reconcile(md, plan)
            if plan is None:
                return refused_unplanned(md, refused), None
        namespace = md["metadata"]["namespace"]
        endpoint = self.client.get(ENDPOINT, md["spec"]["endpoint"], namespace)
        cluster = self.client.get(COMPUTE_CLUSTER, md["status"]["computeCluster"], namespace)
        if endpoint is None or cluster is None or "status" not in cluster:
            return None, f"its Endpoint {md['spec']['endpoint']} or ComputeCluster is missing"
        return deployment_status(self.client, md, plan, endpoint, cluster, refused), None

    def reconcile(self, md, stored):
        """(plan, None) once md's current spec is planned and its children applied (the module's path), or
        (stored, refused) when it cannot be: nothing written, the old plan stays."""
        meta = md["metadata"]
        what, generation = describe(MODEL_DEPLOYMENT, md), meta.get("generation", 1)
        run = KeeperRun(self.client)
        apply = DeploymentApply(self.client, ObjectService(run), meta["name"], meta["namespace"])
        try:
            _refs, plan = apply.reconcile(md, (stored or {}).get("policy"))
        except (ValidationError, CapacityError) as exc:
            refused = {"generation": generation, "field": getattr(exc, "field", "capacity"), "reason": str(exc)}
            if (md.get("status") or {}).get("refused") != refused:
                self.log.warning("%s: generation %s not applied: %s", what, generation, exc)
            return stored, refused
        self.log.info("%s: generation %s planned; applied %s", what, generation, ", ".join(run.changes) or "nothing")
        return plan, None

    def endpoint(self, endpoint):
        return endpoint_status(self.client, endpoint["spec"]), None


def refused_unplanned(md, refused):
    """The status of a ModelDeployment never planned whose spec cannot be planned: Pending, and why."""
    return {
        "phase": PENDING,
        "message": f"spec generation {refused['generation']} not applied: {refused['reason']}",
        "refused": refused,
        "observedGeneration": md["metadata"].get("generation", 1),
    }


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
