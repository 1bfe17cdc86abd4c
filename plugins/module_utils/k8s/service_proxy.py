# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""A cluster-internal Service URL as a path of the API server's service proxy.

`http://NAME.NAMESPACE.svc[.cluster.local]:PORT/PATH` is reachable only from inside the cluster's Service network;
the same document is at `/api/v1/namespaces/NAMESPACE/services/[https:]NAME:PORT/proxy/PATH` on the API server,
which a controller outside the cluster reaches with its kubeconfig (RBAC: `get` on `services/proxy`).
"""

from __future__ import annotations

import re
import urllib.parse

_SERVICE_HOST = re.compile(
    r"^(?P<name>[a-z0-9]([-a-z0-9]*[a-z0-9])?)\.(?P<namespace>[a-z0-9]([-a-z0-9]*[a-z0-9])?)\.svc(\.cluster\.local)?$"
)


def is_service_url(url):
    """Whether `url` names a cluster Service (http(s)://NAME.NAMESPACE.svc[.cluster.local][:PORT]/PATH)."""
    parts = urllib.parse.urlsplit(url)
    return parts.scheme in ("http", "https") and bool(_SERVICE_HOST.match(parts.hostname or ""))


def service_proxy_path(url):
    """The API server path that proxies `url`; ValueError unless `url` names a Service (NAME.NAMESPACE.svc)."""
    if not is_service_url(url):
        raise ValueError(
            f"{url!r} is not a cluster Service URL (http(s)://NAME.NAMESPACE.svc[:PORT]/PATH); the API server's "
            "service proxy reaches only Services"
        )
    parts = urllib.parse.urlsplit(url)
    match = _SERVICE_HOST.match(parts.hostname)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    scheme = "https:" if parts.scheme == "https" else ""
    service = urllib.parse.quote(f"{scheme}{match['name']}:{port}", safe=":")
    path = f"/api/v1/namespaces/{match['namespace']}/services/{service}/proxy{parts.path or '/'}"
    return f"{path}?{parts.query}" if parts.query else path


class ProxiedMetrics:
    """GET of one Service document through the API server (`kube` is a client.KubeClient): one try per call, so a
    failed sample is counted and the next one replaces it."""

    def __init__(self, kube, url):
        self.kube = kube
        self.path = service_proxy_path(url)

    def get(self, timeout):
        """(body bytes, None), or (None, error text naming the proxy path)."""
        self.kube.timeout = timeout
        try:
            text = self.kube.request("GET", self.path, text=True, retry=False)
        except Exception as exc:  # K8sError or a client-side failure: the run goes on, the report says why
            status = getattr(exc, "status", 0)
            return None, f"API server service proxy {self.path}: {'HTTP ' + str(status) + ' ' if status else ''}{exc}"
        return text.encode("utf-8"), None
