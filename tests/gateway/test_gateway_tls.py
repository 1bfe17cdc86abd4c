"""The public Endpoint over HTTPS, as a client outside the cluster sees it: the chain verified against the CA, the
Endpoint's hostname sent as SNI and checked, only the OpenAI routes reachable; admin API, metrics and probes on
the internal listener only. Certificates come from a Secret-style volume and are replaced without a restart."""

import asyncio
import json
import socket
import ssl
import subprocess
import time
import urllib.request

import aiohttp
import pytest
from aiohttp.abc import AbstractResolver
from cryptography import x509

from tests.engine.synthetic import SyntheticUpstream
from tests.gateway.gateway import deployment_objects
from tests.gateway.pki import CertificateAuthority, SecretVolume
from lab.wait import wait_until

pytestmark = pytest.mark.gateway
MODEL = "tiny-qwen2"
HOST = "api.tokenfactory.test"  # the Endpoint's hostname; resolved to loopback by the clients below
MESSAGES = [{"role": "user", "content": "say four words"}]


class LoopbackResolver(AbstractResolver):
    """Resolves every name to 127.0.0.1 (the test's stand-in for DNS); TLS still uses the name for SNI and checks."""

    async def resolve(self, host, port=0, family=socket.AF_INET):
        return [{"hostname": host, "host": "127.0.0.1", "port": port, "family": socket.AF_INET, "proto": 0,
                 "flags": socket.AI_NUMERICHOST}]  # fmt: skip

    async def close(self):
        pass


@pytest.fixture
def pki(tmp_path):
    ca = CertificateAuthority()
    (tmp_path / "ca.pem").write_bytes(ca.pem())
    volume = SecretVolume(tmp_path / "secret")
    cert, key, serial = ca.issue(HOST)
    volume.write(cert, key)
    return ca, volume, tmp_path / "ca.pem", serial


@pytest.fixture
def gw(gateway_factory, pki):
    _ca, volume, _ca_file, _serial = pki
    with SyntheticUpstream(model=MODEL, output_tokens=8) as upstream:
        yield gateway_factory(deployment_objects("tiny", MODEL, upstream.base_url), tls_cert_file=str(volume.cert),
                              tls_key_file=str(volume.key), tls_reload_seconds=0.2)  # fmt: skip


def served_serial(port, ca_file, server_name=HOST) -> int:
    """Handshake like a client: verify against the CA, SNI + hostname check; the serial of the served cert."""
    context = ssl.create_default_context(cafile=str(ca_file))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=server_name) as tls,
    ):
        return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number


async def https(method, url, ca_file, key=None, body=None):
    connector = aiohttp.TCPConnector(resolver=LoopbackResolver(), ssl=ssl.create_default_context(cafile=str(ca_file)))
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with (
        aiohttp.ClientSession(connector=connector) as session,
        session.request(method, url, json=body, headers=headers) as resp,
    ):
        return resp.status, await resp.read()


def test_openai_routes_over_https_with_the_endpoint_certificate(gw, pki):
    _ca, _volume, ca_file, _serial = pki
    port = gw.replicas[0].port
    key = gw.create_key("acme")
    base = f"https://{HOST}:{port}"
    status, body = asyncio.run(https("POST", base + "/v1/chat/completions", ca_file, key,
                                     {"model": MODEL, "messages": MESSAGES, "max_tokens": 2}))  # fmt: skip
    assert status == 200 and json.loads(body)["usage"]["completion_tokens"] == 2
    # curl: another real client, with its own TLS stack; --resolve keeps the hostname for SNI and verification
    out = subprocess.run(
        ["curl", "-sS", "--fail-with-body", "--resolve", f"{HOST}:{port}:127.0.0.1", "--cacert", str(ca_file),
         "-H", f"Authorization: Bearer {key}", f"{base}/v1/models"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert [m["id"] for m in json.loads(out.stdout)["data"]] == [MODEL]
    with pytest.raises(ssl.SSLCertVerificationError, match="match"):
        served_serial(port, ca_file, server_name="other.tokenfactory.test")  # the hostname is checked
    stranger = ca_file.with_name("other-ca.pem")
    stranger.write_bytes(CertificateAuthority("another CA").pem())
    with pytest.raises(ssl.SSLCertVerificationError):
        served_serial(port, stranger)  # the chain is checked against the CA the client trusts


def test_admin_metrics_and_probes_are_not_on_the_public_endpoint(gw, pki):
    _ca, _volume, ca_file, _serial = pki
    base = f"https://{HOST}:{gw.replicas[0].port}"
    for path in ("/admin/v1/tenants", "/metrics", "/health", "/ready", "/admin/v1/models"):
        status, body = asyncio.run(https("GET", base + path, ca_file, key=gw.admin_token))
        assert status == 404 and set(json.loads(body)["error"]) == {"message", "type", "param", "code"}, (path, body)
        request = urllib.request.Request(gw.admin_url + path, headers={"Authorization": f"Bearer {gw.admin_token}"})
        with urllib.request.urlopen(request, timeout=10) as resp:
            assert resp.status == 200, f"{path} on the internal listener"
    internal = f"http://127.0.0.1:{gw.replicas[0].internal_port}"
    status, _body = asyncio.run(https("POST", internal + "/v1/chat/completions", ca_file, gw.create_key("acme"),
                                      {"model": MODEL, "messages": MESSAGES}))  # fmt: skip
    assert status == 404, "the OpenAI routes are not on the internal listener"
    with socket.create_connection(("127.0.0.1", gw.replicas[0].port), timeout=10) as raw:
        raw.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")  # plain HTTP on the TLS port: no answer
        raw.settimeout(5)
        assert not raw.recv(100).startswith(b"HTTP/1.1 200")


def test_a_renewed_certificate_is_served_without_a_restart(gw, pki):
    ca, volume, ca_file, first = pki
    replica = gw.replicas[0]
    pid = replica.proc.pid
    assert served_serial(replica.port, ca_file) == first
    cert, key, renewed = ca.issue(HOST)
    volume.write(cert, key)  # what the kubelet does when cert-manager renews the Secret
    wait_until(lambda: served_serial(replica.port, ca_file) == renewed, 10, "the renewed certificate")
    other_cert, _other_key, _serial = ca.issue(HOST)
    volume.write(other_cert, key)  # a certificate with the wrong key: refused whole, the last good pair stays
    time.sleep(1)
    assert served_serial(replica.port, ca_file) == renewed
    assert replica.proc.pid == pid and replica.proc.poll() is None, "no restart"
    text = urllib_get(replica.internal_url + "/metrics")
    assert 'tf_gateway_tls_certificate_reloads_total{result="loaded"} 1.0' in text
    assert 'tf_gateway_tls_certificate_reloads_total{result="failed"}' in text


def urllib_get(url) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.read().decode()
