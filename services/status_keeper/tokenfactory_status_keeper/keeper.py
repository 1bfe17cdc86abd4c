"""One pass of the keeper over every ModelDeployment and Endpoint: each status recomputed with the modules' own
functions (the collection's status.py) and written, onto the version it was computed from, only when it changed."""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import K8sError
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.kinds import (
    COMPUTE_CLUSTER,
    ENDPOINT,
    MODEL_DEPLOYMENT,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.planner import is_current, stored_plan
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.status import (
    deployment_status,
    endpoint_status,
)

from .logs import LOG, describe, summary
from .reconcile import reconcile, refused_unplanned


class Keeper:
    """One pass (run_pass) over every ModelDeployment and Endpoint (of one namespace, or all); with tls_copy (a
    tls_copy.TlsCopy), first the gateway's copy of the served Endpoint's TLS Secret."""

    def __init__(self, client, namespace=None, log=LOG, tls_copy=None):
        self.client, self.namespace, self.log, self.tls_copy = client, namespace, log, tls_copy
        self.skipped = {}  # describe(obj) -> why it was last left alone (logged once per reason)

    def run_pass(self):
        """{'checked', 'written', 'unchanged', 'skipped', 'conflicts', 'errors'} counts of one pass (the TLS copy,
        when kept, is one more object checked)."""
        counts = dict.fromkeys(("checked", "written", "unchanged", "skipped", "conflicts", "errors"), 0)
        if self.tls_copy is not None:  # first: a pass that cannot list the kinds below still keeps the certificate
            counts["checked"] += 1
            counts[self.tls_copy.keep()] += 1
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
        first when the spec is newer than the plan (reconcile.py)."""
        plan, refused = stored_plan(md), None
        if not is_current(md):
            plan, refused = reconcile(self.client, md, plan, self.log)
            if plan is None:
                return refused_unplanned(md, refused), None
        namespace = md["metadata"]["namespace"]
        endpoint = self.client.get(ENDPOINT, md["spec"]["endpoint"], namespace)
        if endpoint is None:
            return None, f"its Endpoint {md['spec']['endpoint']} is missing"
        # The Endpoint names the cluster (as for the module): a ModelDeployment created by kubectl has no status yet.
        cluster_name = endpoint["spec"]["computeCluster"]
        cluster = self.client.get(COMPUTE_CLUSTER, cluster_name, namespace)
        if cluster is None or "status" not in cluster:
            return None, f"its Endpoint's ComputeCluster {cluster_name} is missing or not registered"
        return deployment_status(self.client, md, plan, endpoint, cluster, refused), None

    def endpoint(self, endpoint):
        return endpoint_status(self.client, endpoint["spec"]), None
