"""Certificates and keys for one lab cluster: a CA, the apiserver serving cert, client certs, SA keys."""

import datetime
import ipaddress
import pathlib

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

SERVICE_IP = "10.96.0.1"
SERVER_NAMES = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")
LIFETIME = datetime.timedelta(days=30)

# Client identity per component: (common name, organisation). RBAC bootstrap roles grant these rights.
CLIENTS = {
    "admin": ("kubernetes-admin", "system:masters"),
    "controller-manager": ("system:kube-controller-manager", None),
    "scheduler": ("system:kube-scheduler", None),
    "kwok": ("kwok-controller", "system:masters"),
}


def _key():
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path, key):
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    path.chmod(0o600)


def _write_cert(path, cert):
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _name(common_name, organisation=None):
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organisation:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organisation))
    return x509.Name(attrs)


def _sign(subject, public_key, issuer, issuer_key, *, ca=False, usages=(), sans=()):
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + LIFETIME)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        )
    else:
        builder = builder.add_extension(
            x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True
        )
        builder = builder.add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def generate(pki_dir: pathlib.Path) -> dict[str, pathlib.Path]:
    """Write every key and certificate into pki_dir; return their paths by role."""
    pki_dir.mkdir(parents=True, exist_ok=True)
    paths = {}

    ca_key = _key()
    ca_name = _name("tokenfactory-lab-ca")
    ca_cert = _sign(ca_name, ca_key.public_key(), ca_name, ca_key, ca=True)
    paths["ca.crt"], paths["ca.key"] = pki_dir / "ca.crt", pki_dir / "ca.key"
    _write_cert(paths["ca.crt"], ca_cert)
    _write_key(paths["ca.key"], ca_key)

    sans = [x509.DNSName(n) for n in SERVER_NAMES]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ("127.0.0.1", SERVICE_IP)]
    _issue(pki_dir, paths, "apiserver", _name("kube-apiserver"), ca_cert, ca_key, [x509.OID_SERVER_AUTH], sans)
    for client, (common_name, organisation) in CLIENTS.items():
        _issue(pki_dir, paths, client, _name(common_name, organisation), ca_cert, ca_key, [x509.OID_CLIENT_AUTH])
    # The apiserver's identity towards aggregated API servers (request-header authentication).
    _issue(pki_dir, paths, "front-proxy", _name("front-proxy-client"), ca_cert, ca_key, [x509.OID_CLIENT_AUTH])

    sa_key = _key()
    paths["sa.key"], paths["sa.pub"] = pki_dir / "sa.key", pki_dir / "sa.pub"
    _write_key(paths["sa.key"], sa_key)
    paths["sa.pub"].write_bytes(
        sa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return paths


def _issue(pki_dir, paths, role, subject, ca_cert, ca_key, usages, sans=()):
    key = _key()
    cert = _sign(subject, key.public_key(), ca_cert.subject, ca_key, usages=usages, sans=sans)
    paths[f"{role}.crt"], paths[f"{role}.key"] = pki_dir / f"{role}.crt", pki_dir / f"{role}.key"
    _write_cert(paths[f"{role}.crt"], cert)
    _write_key(paths[f"{role}.key"], key)
