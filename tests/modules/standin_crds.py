"""STAND-INS for the NVIDIA NIM Operator and Dynamo operator CRDs (not installable in the lab: no registry,
no operators). They accept any spec so the module's NIMService / DynamoGraphDeployment objects can be applied,
owned and pruned for real; no operator acts on them (tests set .status.state themselves to play the operator)."""

STANDINS = {
    ("apps.nvidia.com", "NIMService", "nimservices"),
    ("nvidia.com", "DynamoGraphDeployment", "dynamographdeployments"),
}


def standin_crd(group, kind, plural):
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}", "labels": {"tokenfactory.io/test-stand-in": "true"}},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
            "versions": [
                {
                    "name": "v1alpha1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                            },
                        }
                    },
                }
            ],
        },
    }


def install_standins(kube):
    from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.waiter import crd_established, poll

    for group, kind, plural in sorted(STANDINS):
        kube.apply(standin_crd(group, kind, plural))
    for group, _kind, plural in STANDINS:
        poll(f"{plural}.{group}", crd_established(kube, f"{plural}.{group}"), 30)
