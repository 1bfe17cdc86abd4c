# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""The one Kubernetes client layer of tokenfactory.spark: auth, REST paths, server-side apply."""

from __future__ import annotations

import json
import os
import urllib.parse

from ansible.module_utils.basic import env_fallback, missing_required_lib

try:
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config

    HAS_KUBERNETES = True
    KUBERNETES_IMPORT_ERROR = None
except ImportError as exc:  # pragma: no cover - reported by require_kubernetes()
    HAS_KUBERNETES = False
    KUBERNETES_IMPORT_ERROR = exc

# Options shared by every module that talks to Kubernetes (documented in doc_fragments/k8s_auth.py).
AUTH_ARG_SPEC = {
    "kubeconfig": {"type": "path", "fallback": (env_fallback, ["K8S_AUTH_KUBECONFIG"])},
    "context": {"type": "str", "fallback": (env_fallback, ["K8S_AUTH_CONTEXT"])},
    "host": {"type": "str", "fallback": (env_fallback, ["K8S_AUTH_HOST"])},
    "api_key": {"type": "str", "no_log": True, "fallback": (env_fallback, ["K8S_AUTH_API_KEY"])},
    "validate_certs": {
        "type": "bool",
        "aliases": ["verify_ssl"],
        "fallback": (env_fallback, ["K8S_AUTH_VERIFY_SSL"]),
    },
    "ca_cert": {"type": "path", "aliases": ["ssl_ca_cert"], "fallback": (env_fallback, ["K8S_AUTH_SSL_CA_CERT"])},
    "client_cert": {"type": "path", "aliases": ["cert_file"], "fallback": (env_fallback, ["K8S_AUTH_CERT_FILE"])},
    "client_key": {"type": "path", "aliases": ["key_file"], "fallback": (env_fallback, ["K8S_AUTH_KEY_FILE"])},
    "request_timeout": {"type": "int", "default": 30},
}


# kind -> ResourceType, filled as types are declared (here, in tokenfactory/kinds.py and by the engines).
TYPES_BY_KIND = {}


class ResourceType:
    """Where a kind lives in the REST API (no discovery round trips, no stale discovery cache)."""

    def __init__(self, api_version, kind, plural, namespaced=True):
        self.api_version = api_version
        self.kind = kind
        self.plural = plural
        self.namespaced = namespaced
        TYPES_BY_KIND[kind] = self

    def path(self, namespace=None, name=None, subresource=None):
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        parts = [base]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{urllib.parse.quote(namespace)}")
        parts.append(self.plural)
        if name:
            parts.append(urllib.parse.quote(name))
        if subresource:
            parts.append(subresource)
        return "/".join(parts)

    def __repr__(self):
        return f"{self.kind}.{self.api_version}"


NODE = ResourceType("v1", "Node", "nodes", namespaced=False)
NAMESPACE = ResourceType("v1", "Namespace", "namespaces", namespaced=False)
SECRET = ResourceType("v1", "Secret", "secrets")
SERVICE = ResourceType("v1", "Service", "services")
POD = ResourceType("v1", "Pod", "pods")
ENDPOINT_SLICE = ResourceType("discovery.k8s.io/v1", "EndpointSlice", "endpointslices")
DEPLOYMENT = ResourceType("apps/v1", "Deployment", "deployments")
STATEFUL_SET = ResourceType("apps/v1", "StatefulSet", "statefulsets")
HPA = ResourceType("autoscaling/v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers")
PDB = ResourceType("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets")
CRD = ResourceType("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", False)


def type_of(obj):
    return TYPES_BY_KIND[obj["kind"]]


class K8sError(Exception):
    """An API call failed; .status is the HTTP status (0 when the server was not reached)."""

    def __init__(self, status, message, reason=""):
        super().__init__(message)
        self.status = status
        self.reason = reason


def require_kubernetes(module):
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=str(KUBERNETES_IMPORT_ERROR))


def api_client_from_params(params):
    """Build an ApiClient from the auth options: kubeconfig/context first, then explicit overrides."""
    configuration = k8s_client.Configuration()
    kubeconfig = params.get("kubeconfig")
    explicit_host = params.get("host")
    if kubeconfig or params.get("context") or not explicit_host:
        try:
            k8s_config.load_kube_config(
                config_file=kubeconfig,
                context=params.get("context"),
                client_configuration=configuration,
                persist_config=False,
            )
        except Exception as exc:
            if not explicit_host:
                where = kubeconfig or os.environ.get("KUBECONFIG", "~/.kube/config")
                try:
                    k8s_config.load_incluster_config(client_configuration=configuration)
                except Exception:
                    raise K8sError(0, f"cannot load kubeconfig {where}: {exc}") from exc
    if explicit_host:
        configuration.host = explicit_host.rstrip("/")
    if params.get("api_key"):
        configuration.api_key = {"authorization": f"Bearer {params['api_key']}"}
    if params.get("validate_certs") is not None:
        configuration.verify_ssl = params["validate_certs"]
    for option, attribute in (("ca_cert", "ssl_ca_cert"), ("client_cert", "cert_file"), ("client_key", "key_file")):
        if params.get(option):
            setattr(configuration, attribute, params[option])
    return k8s_client.ApiClient(configuration)


class KubeClient:
    """Thin JSON client over the kubernetes ApiClient; every module goes through it."""

    def __init__(self, params, field_manager, api_client=None):
        self.api = api_client or api_client_from_params(params)
        self.timeout = params.get("request_timeout") or 30
        self.field_manager = field_manager

    def request(self, method, path, body=None, query=None, content_type="application/json", text=False):
        """The decoded JSON answer (text=True: the answer as text, e.g. a pod log)."""
        headers = {"Accept": "*/*" if text else "application/json", "Content-Type": content_type}
        query_pairs = [(k, v) for k, v in (query or {}).items() if v is not None]
        try:
            serialized = self.api.param_serialize(
                method,
                path,
                query_params=query_pairs,
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            response = self.api.call_api(*serialized, _request_timeout=self.timeout)
            data = response.read()
        except Exception as exc:
            raise K8sError(0, f"{method} {path}: cannot reach the API server: {exc}") from exc
        answer = data.decode("utf-8", "replace") if isinstance(data, bytes | bytearray) else str(data or "")
        if not 200 <= response.status <= 299:
            message, reason = answer, ""
            try:
                status = json.loads(answer)
                message, reason = status.get("message", answer), status.get("reason", "")
            except ValueError:
                pass
            raise K8sError(response.status, message, reason)
        if text:
            return answer
        return json.loads(answer) if answer else {}

    def get(self, rtype, name, namespace=None):
        """The object, or None when it does not exist."""
        try:
            return self.request("GET", rtype.path(namespace, name))
        except K8sError as exc:
            if exc.status == 404:
                return None
            raise

    def log(self, pod, namespace, container, tail_lines=None, previous=False):
        """The last lines of a pod container's log (previous=True: of its run before the last restart)."""
        query = {
            "container": container,
            "tailLines": None if tail_lines is None else str(tail_lines),
            "previous": "true" if previous else None,
        }
        return self.request("GET", POD.path(namespace, pod, "log"), query=query, text=True)

    def list(self, rtype, namespace=None, label_selector=None):
        query = {"labelSelector": label_selector}
        return self.request("GET", rtype.path(namespace), query=query).get("items", [])

    def apply(self, obj, dry_run=False, subresource=None):
        """Server-side apply owned by the field manager (force: this collection owns these fields)."""
        rtype = type_of(obj)
        meta = obj["metadata"]
        query = {
            "fieldManager": self.field_manager,
            "force": "true",
            "fieldValidation": "Strict",
            "dryRun": "All" if dry_run else None,
        }
        path = rtype.path(meta.get("namespace"), meta["name"], subresource)
        return self.request("PATCH", path, body=obj, query=query, content_type="application/apply-patch+yaml")

    def delete(self, rtype, name, namespace=None, dry_run=False, propagation="Foreground"):
        # With a body the API server reads DeleteOptions only from it (query parameters are ignored).
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
        if dry_run:
            body["dryRun"] = ["All"]
        try:
            return self.request("DELETE", rtype.path(namespace, name), body=body)
        except K8sError as exc:
            if exc.status == 404:
                return None
            raise
