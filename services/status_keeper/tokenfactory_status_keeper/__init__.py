"""Token Factory status keeper: reconciles ModelDeployments and keeps ModelDeployment and Endpoint `status` current
between module runs.

Every interval it lists both kinds (keeper.Keeper, one pass; loop.run, pass after pass). A ModelDeployment whose spec
generation is newer than its plan (status.plan, planner.stored_plan), for example after a `kubectl apply` of a new
replica count or engine argument, is planned and its children applied by the module's own path (reconcile.py:
deployment_apply.DeploymentApply, the same references, plan, dry runs and server-side apply with the collection's
field manager, domain.MANAGED_BY, with the capacity options the last plan was made with). A spec that cannot be
planned (more GPUs than exist, a missing reference) writes nothing but status: the old plan and its running pods stay,
and status.refused names the generation and the reason.

Then it recomputes each object's status with the functions the modules use (the collection's status.py) and writes it
only when it differs from the stored one: a deployment whose engine pod starts crash-looping after it was Ready turns
Failed, and the gateway stops routing to it, without a module run.

A status write is a server-side apply of .status by the collection's field manager (as the modules write it) that
names the resourceVersion it was computed from: when a module (or another keeper) changed the object meanwhile, the
write fails with 409 and the object is looked at again on the next pass. The module and the keeper share that one
field manager and one code path, so they never fight: a module run on a spec the keeper already applied changes
nothing.

Configured with the Endpoint the gateway serves and the gateway's copy of its TLS Secret (--endpoint, --tls-copy),
each pass first keeps that copy in step with the Endpoint's kubernetes.io/tls Secret (tls_copy.py): a Secret renewed
by cert-manager reaches the gateway's Secret volume, which the gateway reloads, without an Ansible run.

Run in the cluster by the gateway role (gateway_status_keeper), from the gateway image:
    python -m tokenfactory_status_keeper --interval 10
It imports the collection's module_utils (ansible_collections.tokenfactory.spark, with kubernetes.core's) from the
Python path: the gateway image has them under /opt/gateway/collections. It authenticates as the modules do
(kubernetes.core's options and K8S_AUTH_* variables); with none set, in a pod, with the pod's service account token.
"""

__version__ = "0.1.0"
