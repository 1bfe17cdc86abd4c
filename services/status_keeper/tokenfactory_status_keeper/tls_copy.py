"""The gateway's copy of the Endpoint's TLS Secret, kept in step with it between Ansible runs.

The Endpoint's certificate is a kubernetes.io/tls Secret in the Endpoint's namespace (spec.tls.secretName; cert-manager
renews it in place). A Secret volume cannot cross namespaces, so the gateway role copies it into the gateway's namespace
(roles/gateway/tasks/tls.yml); each pass this copies a renewed one again (tls.crt and tls.key), so it reaches the
gateway's Secret volume, which the gateway reloads without a restart, with no Ansible run.

Only a copy that exists is kept: creating it and turning HTTPS on stay the role's job. A write is a server-side apply
of the two keys by the keeper's field manager (forced: the role created the copy with another manager) onto the
version of the copy it compared against (a 409 is final: next pass). Why it is left alone (no TLS, a missing copy
or source, a source of another type) or failed (an API error such as a 403) is logged once while it stays the same,
and counted every pass. Neither the key nor the certificate is ever logged or returned.
"""

from __future__ import annotations

import base64
import binascii

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import SECRET, K8sError
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.kinds import ENDPOINT

from .logs import LOG

TLS_TYPE = "kubernetes.io/tls"
TLS_KEYS = ("tls.crt", "tls.key")
REDACTED = "<redacted>"


def parse_ref(value):
    """(namespace, name) of '<namespace>/<name>'; ValueError otherwise."""
    namespace, _slash, name = (value or "").partition("/")
    if not namespace or not name or "/" in name:
        raise ValueError(f"{value!r} is not <namespace>/<name>")
    return namespace, name


def redact(text, data):
    """text without any of data's values (base64, as in the object) nor their decoded lines."""
    secrets = set()
    for value in data.values():
        if not isinstance(value, str) or not value:
            continue
        secrets.add(value)
        try:
            decoded = base64.b64decode(value, validate=True).decode("utf-8", "replace")
        except (binascii.Error, ValueError):
            continue
        secrets.update(line.strip() for line in decoded.splitlines() if len(line.strip()) >= 16)
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


class TlsCopy:
    """One look (keep) per pass at the Endpoint `endpoint` ((namespace, name)) and the gateway's copy `copy` of its
    TLS Secret ((namespace, name))."""

    def __init__(self, client, endpoint, copy, log=LOG):
        self.client, self.endpoint, self.copy, self.log = client, endpoint, copy, log
        self.said = None  # why it was last left alone or failed (logged once per reason)

    @property
    def what(self):
        return f"Endpoint {self.endpoint[0]}/{self.endpoint[1]}"

    def keep(self):
        """'written', 'unchanged', 'skipped', 'conflicts' or 'errors'."""
        wanted = {}
        try:
            found = self.read()
            if isinstance(found, str):
                return self.left("skipped", f"TLS copy not kept: {found}")
            source_ref, copy, wanted = found
            if {key: (copy.get("data") or {}).get(key) for key in TLS_KEYS} == wanted:
                self.said = None
                return "unchanged"
            self.write(copy, wanted)
        except K8sError as exc:
            if exc.status == 409:
                self.log.info("%s: its TLS copy changed while it was compared; next pass", self.what)
                return "conflicts"
            message = redact(str(exc), wanted)[:300]
            return self.left("errors", f"TLS copy not kept: API error {exc.status}: {message}", warning=True)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:  # content this version cannot read
            return self.left("errors", f"TLS copy not kept: unexpected content ({type(exc).__name__})", warning=True)
        self.said = None
        namespace, name = self.copy
        self.log.info("%s: TLS Secret %s changed; copied into %s/%s", self.what, source_ref, namespace, name)
        return "written"

    def left(self, outcome, why, warning=False):
        """outcome, having said why (once while it stays the same)."""
        if self.said != why:
            (self.log.warning if warning else self.log.info)("%s: %s", self.what, why)
        self.said = why
        return outcome

    def read(self):
        """Why the copy is left alone, or (the source's '<namespace>/<name>', the copy, the source's tls.crt and
        tls.key as stored, base64)."""
        namespace, name = self.endpoint
        endpoint = self.client.get(ENDPOINT, name, namespace)
        if endpoint is None:
            return "the Endpoint does not exist"
        source_name = ((endpoint.get("spec") or {}).get("tls") or {}).get("secretName")
        if not source_name:
            return "the Endpoint has no TLS (spec.tls.secretName)"
        copy_ns, copy_name = self.copy
        copy = self.client.get(SECRET, copy_name, copy_ns)
        if copy is None:
            return f"the gateway's copy {copy_ns}/{copy_name} does not exist (the gateway role creates it)"
        source_ref = f"{namespace}/{source_name}"
        source = self.client.get(SECRET, source_name, namespace)
        if source is None:
            return f"its TLS Secret {source_ref} does not exist"
        if source.get("type") != TLS_TYPE:
            return f"its TLS Secret {source_ref} is not of type {TLS_TYPE}"
        wanted = {key: (source.get("data") or {}).get(key) for key in TLS_KEYS}
        if not all(wanted.values()):
            return f"its TLS Secret {source_ref} has no {' or no '.join(TLS_KEYS)}"
        return source_ref, copy, wanted

    def write(self, copy, data):
        """Server-side apply of tls.crt and tls.key onto the version of the copy they were compared with; nothing
        of the answer (the Secret) is kept."""
        namespace, name = self.copy
        body = {
            "apiVersion": SECRET.api_version,
            "kind": SECRET.kind,
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": copy["metadata"]["resourceVersion"]},
            "data": dict(data),
        }
        self.client.apply(body, conflict=False)
