# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Planning a ModelDeployment and applying its children: the one path of the model_deployment module and the keeper.

Both call it with an object writer (objects.ObjectService) over a KubeClient of the collection's field manager
(domain.MANAGED_BY): the same references, the same plan (planner.plan_deployment), the same server-side dry runs of
every child before the first write, the same pruning of children an older plan had. The module also applies the
ModelDeployment itself (its spec is the module's options); the keeper never writes a spec, only children and status.
"""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import K8sError
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.checks import ValidationError
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines import (
    engine_of,
    possible_children,
    render,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.kinds import (
    COMPUTE_CLUSTER,
    ENDPOINT,
    MODEL,
    MODEL_DEPLOYMENT,
    PROVIDER,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.planner import plan_deployment
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.references import reference, require_crd


class DeploymentApply:
    """References, plan (once), dry runs of every child, writes, pruning of one ModelDeployment `name`."""

    def __init__(self, client, objects, name, namespace):
        self.client, self.objects, self.name, self.namespace = client, objects, name, namespace

    def references(self, spec):
        """(model, provider, endpoint, cluster) the spec refers to; a ValidationError naming the field otherwise."""
        required = engine_of(spec).REQUIRED_CRD
        if required:
            require_crd(self.client, required["plural"], required["group"], required["purpose"])
        model = reference(self.client, MODEL, "model", spec["model"], self.namespace)
        provider = self.client.get(PROVIDER, model["spec"]["provider"], self.namespace)
        if provider is None:
            raise ValidationError(
                "model", f"Model {spec['model']} refers to Provider {model['spec']['provider']!r}, which does not exist"
            )
        endpoint = reference(self.client, ENDPOINT, "endpoint", spec["endpoint"], self.namespace)
        cluster_name = endpoint["spec"]["computeCluster"]
        cluster = self.client.get(COMPUTE_CLUSTER, cluster_name, self.namespace)
        if cluster is None or "status" not in cluster:
            raise ValidationError(
                "endpoint", f"Endpoint {spec['endpoint']} uses ComputeCluster {cluster_name!r}, which is not registered"
            )
        return model, provider, endpoint, cluster

    def other_deployments(self):
        return [
            md
            for md in self.client.list(MODEL_DEPLOYMENT)
            if (md["metadata"]["namespace"], md["metadata"]["name"]) != (self.namespace, self.name)
            and not md["metadata"].get("deletionTimestamp")
        ]

    def plan(self, spec, policy, generation):
        """(references, plan): everything decided, nothing written (ValidationError/CapacityError say why not)."""
        refs = self.references(spec)
        model, _provider, _endpoint, cluster = refs
        plan = plan_deployment(
            spec, model["spec"], cluster, self.other_deployments(), policy, name=self.name, generation=generation
        )
        return refs, plan

    def stale_children(self, owner_uid, plan):
        """Children this deployment owned before but no longer has (engine switched, HPA removed...)."""
        stale = []
        for rtype, child_name in possible_children(self.name):
            if f"{rtype.kind}/{child_name}" in plan["children"]:
                continue
            try:
                child = self.client.get(rtype, child_name, self.namespace)
            except K8sError:  # the engine's CRD is not installed: nothing of that kind exists
                child = None
            owners = (child or {}).get("metadata", {}).get("ownerReferences", [])
            if any(o.get("uid") == owner_uid for o in owners):
                stale.append((rtype, child_name))
        return stale

    def dry_run_children(self, md, refs, plan):
        """[(child, current, planned)] of every child rendered for md: server-side dry runs, nothing written."""
        model, provider, _endpoint, _cluster = refs
        return [(child, *self.objects.plan(child)) for child in render(md, model["spec"], provider, plan)]

    def write_children(self, md, refs, plan, planned_children, stale, rerender=False):
        """Write the children dry-run for md (rerender: md was created since, they must name its new uid), prune."""
        model, provider, _endpoint, _cluster = refs
        if rerender:
            children = render(md, model["spec"], provider, plan)
            planned_children = [(new, *old[1:]) for new, old in zip(children, planned_children, strict=True)]
        for child, current, planned in planned_children:
            self.objects.write(child, current, planned)
        for rtype, child_name in stale:
            # Background: the stale child disappears now, the garbage collector removes what it owned.
            self.objects.remove(rtype, child_name, self.namespace, propagation="Background")

    def reconcile(self, md, policy):
        """The keeper's path for a stored md whose spec is newer than its plan: plan it, apply its children.
        Returns (refs, plan); raises ValidationError/CapacityError (nothing written) when the spec cannot be planned."""
        refs, plan = self.plan(md["spec"], policy, md["metadata"].get("generation", 1))
        planned_children = self.dry_run_children(md, refs, plan)
        stale = self.stale_children(md["metadata"]["uid"], plan)
        self.write_children(md, refs, plan, planned_children, stale)
        return refs, plan
