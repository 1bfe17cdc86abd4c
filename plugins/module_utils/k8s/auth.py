# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""A kubernetes ApiClient from kubernetes.core's connection options, through public seams only.

The options and their K8S_AUTH_* environment variables are kubernetes.core's (its public argument spec in
args_common, documented by its doc fragment kubernetes.core.k8s_auth_options); the configuration is loaded with
the kubernetes client's public config API into a fresh Configuration (never the process-wide default), in
kubernetes.core's order: host with credentials as given, else the kubeconfig or context named, else in-cluster,
else the default kubeconfig. A kubeconfig that cannot be read fails naming the option and the path it tried.
"""

from __future__ import annotations

import base64
import os

from ansible_collections.kubernetes.core.plugins.module_utils.args_common import (
    AUTH_ARG_MAP,
    AUTH_ARG_SPEC,
    AUTH_PROXY_HEADERS_SPEC,
)

try:
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config

    HAS_KUBERNETES = True
    KUBERNETES_IMPORT_ERROR = None
except ImportError as exc:  # pragma: no cover - reported by client.require_kubernetes()
    HAS_KUBERNETES = False
    KUBERNETES_IMPORT_ERROR = exc

# Ansible option -> the kubernetes Configuration attribute it sets (kubernetes.core's map, reversed).
CONFIGURATION_ATTRIBUTE = {option: attribute for attribute, option in AUTH_ARG_MAP.items()}
IMPERSONATION_HEADERS = {"impersonate_user": "Impersonate-User", "impersonate_groups": "Impersonate-Group"}


class KubeconfigError(Exception):
    """The client cannot be configured; the message names the option and the path it tried, never a credential."""


def _env(option):
    value = os.environ.get(f"K8S_AUTH_{option.upper()}")
    attribute = CONFIGURATION_ATTRIBUTE.get(option, option)
    if value is None and attribute != option:
        value = os.environ.get(f"K8S_AUTH_{attribute.upper()}")
    return value


def _typed(spec, value):
    if spec.get("type") == "bool":
        return value.lower() not in ("0", "false", "no")
    if spec.get("type") == "list":
        return [item for item in value.split(",") if item]
    return value


def auth_options(params):
    """The connection options: each from params, else its K8S_AUTH_* environment variable (as kubernetes.core)."""
    options = {}
    for option, spec in AUTH_ARG_SPEC.items():
        value = params.get(option)
        if value is None and option == "proxy_headers":
            headers = {key: _env(f"proxy_headers_{key}") for key in AUTH_PROXY_HEADERS_SPEC}
            value = {key: _typed(AUTH_PROXY_HEADERS_SPEC[key], v) for key, v in headers.items() if v is not None}
        elif value is None and _env(option) is not None:
            value = _typed(spec, _env(option))
        if value not in (None, {}, []):
            options[option] = value
    return options


def _has_credentials(options):
    given = options.keys()
    return "host" in given and (
        {"username", "password"} <= given or "api_key" in given or {"client_cert", "client_key"} <= given
    )


def kubeconfig_source(options, params):
    """Where the kubeconfig came from, for messages: the option, its environment variable, or the default."""
    if params.get("kubeconfig") is not None:
        return "option kubeconfig"
    if "kubeconfig" in options:
        return "option kubeconfig (from K8S_AUTH_KUBECONFIG)"
    return "option kubeconfig unset, default kubeconfig (KUBECONFIG or ~/.kube/config)"


def _load_kubeconfig(options, configuration, source):
    kubeconfig = options.get("kubeconfig")
    loader_options = {
        "context": options.get("context"),
        "persist_config": bool(options.get("persist_config")),
        "client_configuration": configuration,
    }
    if isinstance(kubeconfig, dict):
        where = f"{source}: the kubeconfig given as a dict"
    else:
        path = kubeconfig or k8s_config.KUBE_CONFIG_DEFAULT_LOCATION
        where = f"{source}: {path}"
        if not any(os.path.isfile(os.path.expanduser(p)) for p in str(path).split(os.pathsep)):
            raise KubeconfigError(f"cannot configure the Kubernetes client: {where}: no such file")
    try:
        if isinstance(kubeconfig, dict):
            k8s_config.load_kube_config_from_dict(config_dict=kubeconfig, **loader_options)
        else:
            k8s_config.load_kube_config(config_file=kubeconfig, **loader_options)
    except (k8s_config.ConfigException, OSError, TypeError, ValueError) as exc:
        raise KubeconfigError(f"cannot configure the Kubernetes client from {where}: {exc}") from exc


def proxy_headers(proxy_basic_auth=None, basic_auth=None, user_agent=None):
    """The headers of kubernetes.core's proxy_headers option (what urllib3.util.make_headers makes of them)."""
    headers = {}
    if proxy_basic_auth:
        headers["proxy-authorization"] = "Basic " + base64.b64encode(proxy_basic_auth.encode()).decode()
    if basic_auth:
        headers["authorization"] = "Basic " + base64.b64encode(basic_auth.encode()).decode()
    if user_agent:
        headers["user-agent"] = user_agent
    return headers


def configuration_from_options(options, params=None):
    """A fresh kubernetes Configuration from the options (auth_options())."""
    configuration = k8s_client.Configuration()
    source = kubeconfig_source(options, params or {})
    if _has_credentials(options):
        pass  # enough to authenticate: no kubeconfig, no in-cluster config
    elif options.get("kubeconfig") or options.get("context"):
        _load_kubeconfig(options, configuration, source)
    else:
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)
        except k8s_config.ConfigException:
            _load_kubeconfig(options, configuration, source)
    for option, value in options.items():
        attribute = CONFIGURATION_ATTRIBUTE.get(option)
        if attribute is None or option in ("kubeconfig", "context", "persist_config"):
            continue
        if option == "host":
            value = value.rstrip("/")
        elif option == "api_key":
            value = {"authorization": f"Bearer {value}"}
        elif option == "proxy_headers":
            value = proxy_headers(**value)
        setattr(configuration, attribute, value)
    configuration.retries = False  # urllib3 would retry some 429/503 silently; retries.py does it for all, visibly
    return configuration


class RepeatedHeader(str):
    """A header name that may occur more than once among the default headers (one Impersonate-Group per group)."""

    def __hash__(self):
        return id(self)

    def __eq__(self, other):
        return self is other


def api_client_from_params(params):
    """An ApiClient from the connection options in params; KubeconfigError when it cannot be configured."""
    options = auth_options(params)
    api = k8s_client.ApiClient(configuration_from_options(options, params))
    for option, header in IMPERSONATION_HEADERS.items():
        values = options.get(option)
        for value in values if isinstance(values, list) else [values] if values else []:
            api.set_default_header(RepeatedHeader(header), value)
    return api


# Keys of a kubeconfig whose values name things (never credentials): messages may show them.
NAMING_KEYS = frozenset({"apiVersion", "kind", "name", "cluster", "user", "namespace", "current-context", "server"})


def _leaves(value, key=None):
    if isinstance(value, dict):
        for child_key, child in value.items():
            yield from _leaves(child, child_key)
    elif isinstance(value, list):
        for child in value:
            yield from _leaves(child, key)
    elif value is not None:
        yield key, str(value)


def reveal_kubeconfig_path(module):
    """Let messages name the kubeconfig: Ansible masks every value of a no_log option, and kubeconfig is no_log
    because a dict may hold tokens and keys. A path is not a credential; in a dict, the values of naming keys
    (cluster, user and context names, server, ...) are not either, unless the same text is also a credential."""
    kubeconfig = module.params.get("kubeconfig")
    if isinstance(kubeconfig, str):
        module.no_log_values.discard(kubeconfig)
    elif isinstance(kubeconfig, dict):
        leaves = list(_leaves(kubeconfig))
        secret = {value for key, value in leaves if key not in NAMING_KEYS}
        for key, value in leaves:
            if key in NAMING_KEYS and value not in secret:
                module.no_log_values.discard(value)
