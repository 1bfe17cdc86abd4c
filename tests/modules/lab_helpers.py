"""Drive the modules against the lab's real API server: run main() in-process, snapshot a namespace."""

import contextlib
import importlib
import io
import json
import uuid

from ansible.module_utils import _internal
from ansible.module_utils.testing import patch_module_args
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s import client as k8s
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory import kinds
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.domain import MANAGED_BY

SNAPSHOT_TYPES = (
    kinds.COMPUTE_CLUSTER,
    kinds.ENDPOINT,
    kinds.PROVIDER,
    kinds.MODEL,
    kinds.MODEL_DEPLOYMENT,
    k8s.DEPLOYMENT,
    k8s.STATEFUL_SET,
    k8s.SERVICE,
    k8s.SECRET,
    k8s.HPA,
    k8s.PDB,
)


def run_module(module_name, default_kubeconfig, check_mode=False, diff=False, **args):
    """Run tokenfactory.spark.<name> like Ansible does (args JSON in, result JSON out); return the result.
    The lab's kubeconfig is used unless args set `kubeconfig` (a path, a dict, or None for host/api_key);
    default_kubeconfig=None: no `kubeconfig` argument (a module without the Kubernetes auth options)."""
    module = importlib.import_module(f"ansible_collections.tokenfactory.spark.plugins.modules.{module_name}")
    auth = {"kubeconfig": str(default_kubeconfig)} if default_kubeconfig is not None else {}
    args = {**auth, **args, "_ansible_check_mode": check_mode, "_ansible_diff": diff}
    out = io.StringIO()
    # A module runs target-side: once any test in this process has loaded controller code, Ansible would send
    # module.warn() to the controller's display instead of the result's `warnings`.
    controller, _internal.is_controller = _internal.is_controller, False
    try:
        with patch_module_args(args), contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            module.main()
    finally:
        _internal.is_controller = controller
    text = out.getvalue()
    return json.loads(text[text.index("{") :])


def client(kubeconfig):
    return k8s.KubeClient({"kubeconfig": str(kubeconfig)}, field_manager=MANAGED_BY)


# Controllers (deployment controller, kwok) keep writing these kinds' status and revision annotation after a
# rollout; what a module could change there is spec, labels and annotations, so generation + metadata is compared.
CONTROLLER_OWNED_STATUS = {"Deployment"}
CONTROLLER_ANNOTATIONS = {"deployment.kubernetes.io/revision"}


def snapshot(kube, namespace):
    """(kind, name) -> what identifies the current version of everything the modules could touch in namespace."""
    state = {}
    for rtype in SNAPSHOT_TYPES:
        for obj in kube.list(rtype, namespace):
            meta = obj["metadata"]
            if rtype is k8s.SERVICE and meta["name"] == "kubernetes":
                continue
            if rtype.kind in CONTROLLER_OWNED_STATUS:
                annotations = {
                    k: v for k, v in (meta.get("annotations") or {}).items() if k not in CONTROLLER_ANNOTATIONS
                }
                version = (
                    meta["generation"],
                    repr(sorted((meta.get("labels") or {}).items())),
                    repr(sorted(annotations.items())),
                )
            else:
                version = meta["resourceVersion"]
            state[(rtype.kind, meta["name"])] = version
    return state


def new_namespace(kube, prefix="tf"):
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


def self_signed(hostname):
    """A fresh certificate + key pair for TLS tests (PEM strings)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostname)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(hostname)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return cert.public_bytes(serialization.Encoding.PEM).decode(), key_pem
