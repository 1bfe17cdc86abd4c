"""A throw-away CA and server certificates for TLS tests (cryptography), written the way a Kubernetes TLS Secret
volume presents them: `tls.crt` and `tls.key` symlinks through `..data`, swapped atomically on update."""

from __future__ import annotations

import datetime
import os
import pathlib

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

HOUR = datetime.timedelta(hours=1)


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


class CertificateAuthority:
    def __init__(self, common: str = "tokenfactory test CA"):
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(_name(common))
            .issuer_name(_name(common))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - HOUR)
            .not_valid_after(now + 24 * HOUR)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
            .sign(self.key, hashes.SHA256())
        )

    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, hostname: str) -> tuple[bytes, bytes, int]:
        """(certificate PEM, key PEM, serial) of a server certificate for `hostname`."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        serial = x509.random_serial_number()
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(hostname))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(serial)
            .not_valid_before(now - HOUR)
            .not_valid_after(now + 24 * HOUR)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(hostname)]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return cert.public_bytes(serialization.Encoding.PEM) + self.pem(), key_pem, serial


class SecretVolume:
    """A directory laid out like a mounted kubernetes.io/tls Secret; `write()` updates it the kubelet's way."""

    def __init__(self, directory: pathlib.Path):
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self._version = 0

    @property
    def cert(self) -> pathlib.Path:
        return self.dir / "tls.crt"

    @property
    def key(self) -> pathlib.Path:
        return self.dir / "tls.key"

    def write(self, cert_pem: bytes, key_pem: bytes) -> None:
        self._version += 1
        version = self.dir / f"..v{self._version}"
        version.mkdir()
        (version / "tls.crt").write_bytes(cert_pem)
        (version / "tls.key").write_bytes(key_pem)
        os.chmod(version / "tls.key", 0o600)
        staging = self.dir / "..data_tmp"
        staging.unlink(missing_ok=True)
        staging.symlink_to(version.name)
        staging.replace(self.dir / "..data")  # atomic: readers see the old pair or the new one
        for name in ("tls.crt", "tls.key"):
            if not (self.dir / name).is_symlink():
                (self.dir / name).symlink_to(f"..data/{name}")
