# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""The one Kubernetes client layer of tokenfactory.spark: auth, REST paths, server-side apply, retries.

Authentication takes kubernetes.core's options (the same options, environment variables and kubeconfig handling as
its modules: kubeconfig as a file or a dict, contexts, proxy, impersonation, ...) through public seams (auth.py).
Each request waits at most request_timeout seconds. Requests go straight to fixed REST
paths, without kubernetes.core's discovery client: the kinds are known, so no discovery round trips and no stale
discovery cache. Transient answers (409, 429, 5xx) are retried with backoff in one place (retries.py).
"""

from __future__ import annotations

import json
import urllib.parse

from ansible.module_utils.basic import missing_required_lib
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.auth import AUTH_ARG_SPEC as CORE_AUTH_ARG_SPEC
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.auth import (
    HAS_KUBERNETES,
    KUBERNETES_IMPORT_ERROR,
    KubeconfigError,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.auth import api_client_from_params as configured
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.retries import RetryableError, with_retries


# kubernetes.core's connection options (documented by its doc fragment kubernetes.core.k8s_auth_options), plus
# the time one request may take.
AUTH_ARG_SPEC = {**CORE_AUTH_ARG_SPEC, "request_timeout": {"type": "int", "default": 30}}


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
EVENT = ResourceType("v1", "Event", "events")
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

    # Conflict, throttling and server-side trouble pass: the same request may well succeed a moment later.
    TRANSIENT = frozenset({409, 429, 500, 502, 503, 504})

    def __init__(self, status, message, reason=""):
        super().__init__(message)
        self.status = status
        self.reason = reason

    @property
    def transient(self):
        return self.status in self.TRANSIENT


def require_kubernetes(module):
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=str(KUBERNETES_IMPORT_ERROR))


def api_client_from_params(params):
    """An ApiClient from the connection options (and K8S_AUTH_* environment variables); K8sError(0) naming the
    option and the kubeconfig path when it cannot be configured."""
    try:
        return configured(params)
    except KubeconfigError as exc:
        raise K8sError(0, str(exc)) from exc


class KubeClient:
    """Thin JSON client over the kubernetes ApiClient; every module goes through it."""

    def __init__(self, params, field_manager, api_client=None, on_retry=None):
        self.api = api_client or api_client_from_params(params)
        self.timeout = params.get("request_timeout") or AUTH_ARG_SPEC["request_timeout"]["default"]
        self.field_manager = field_manager
        self.on_retry = on_retry

    def request(
        self,
        method,
        path,
        body=None,
        query=None,
        content_type="application/json",
        text=False,
        conflict=True,
        retry=True,
    ):
        """One API call, retried on transient answers: the decoded JSON answer (text=True: the answer as text,
        e.g. a pod log), or K8sError. conflict=False: a 409 is final (a write that names the resourceVersion it
        was computed from fails at once when the object changed since). retry=False: one try (a periodic sample
        that the next sample replaces)."""

        def call():
            return self._request(method, path, body, query, content_type, text, conflict)

        if not retry:
            try:
                return call()
            except RetryableError as exc:
                raise exc.error from None
        return with_retries(call, f"{method} {path}", self.on_retry)

    def _request(self, method, path, body, query, content_type, text, conflict=True):
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
            error = K8sError(response.status, message, reason)
            if error.transient and (conflict or error.status != 409):
                raise RetryableError(error, response.getheader("Retry-After"))
            raise error
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

    def apply(self, obj, dry_run=False, subresource=None, conflict=True):
        """Server-side apply owned by the field manager (force: this collection owns these fields). With
        metadata.resourceVersion in obj it applies only to that version; conflict=False: a 409 is not retried."""
        rtype = type_of(obj)
        meta = obj["metadata"]
        query = {
            "fieldManager": self.field_manager,
            "force": "true",
            "fieldValidation": "Strict",
            "dryRun": "All" if dry_run else None,
        }
        path = rtype.path(meta.get("namespace"), meta["name"], subresource)
        return self.request(
            "PATCH", path, body=obj, query=query, content_type="application/apply-patch+yaml", conflict=conflict
        )

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
