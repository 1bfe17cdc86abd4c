"""A ModelDeployment whose spec is newer than its plan: planned and its children applied by the model_deployment
module's own path (the collection's deployment_apply.py), or refused in status with the old plan kept."""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.capacity import CapacityError
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.checks import ValidationError
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.deployment_apply import DeploymentApply
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.domain import PENDING
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.kinds import MODEL_DEPLOYMENT
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.objects import ObjectService

from .logs import describe


class KeeperRun:
    """What objects.ObjectService needs of a module run, for the keeper: its client, no check mode, the changes."""

    check_mode = False

    def __init__(self, client):
        self.client, self.changes = client, []

    def record(self, header, before, after):
        self.changes.append(header)


def reconcile(client, md, stored, log):
    """(plan, None) once md's current spec is planned and its children applied (the module's path), or
    (stored, refused) when it cannot be: nothing written, the old plan stays."""
    meta = md["metadata"]
    what, generation = describe(MODEL_DEPLOYMENT, md), meta.get("generation", 1)
    run = KeeperRun(client)
    apply = DeploymentApply(client, ObjectService(run), meta["name"], meta["namespace"])
    try:
        _refs, plan = apply.reconcile(md, (stored or {}).get("policy"))
    except (ValidationError, CapacityError) as exc:
        refused = {"generation": generation, "field": getattr(exc, "field", "capacity"), "reason": str(exc)}
        if (md.get("status") or {}).get("refused") != refused:
            log.warning("%s: generation %s not applied: %s", what, generation, exc)
        return stored, refused
    log.info("%s: generation %s planned; applied %s", what, generation, ", ".join(run.changes) or "nothing")
    return plan, None


def refused_unplanned(md, refused):
    """The status of a ModelDeployment never planned whose spec cannot be planned: Pending, and why."""
    return {
        "phase": PENDING,
        "message": f"spec generation {refused['generation']} not applied: {refused['reason']}",
        "refused": refused,
        "observedGeneration": md["metadata"].get("generation", 1),
    }
