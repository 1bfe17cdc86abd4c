# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""One HTTP client for the gateway's admin API, shared by the tenant, api_key and usage_info modules."""

from __future__ import annotations

import json

from ansible.module_utils.basic import env_fallback
from ansible.module_utils.six.moves.urllib.parse import quote, urlencode
from ansible.module_utils.urls import open_url
from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError

GATEWAY_AUTH_ARG_SPEC = {
    "gateway_url": {"type": "str", "required": True, "fallback": (env_fallback, ["TF_GATEWAY_URL"])},
    "admin_token": {
        "type": "str",
        "required": True,
        "no_log": True,
        "fallback": (env_fallback, ["TF_GATEWAY_ADMIN_TOKEN"]),
    },
    "validate_certs": {"type": "bool", "default": True},
    "ca_path": {"type": "path"},
    "timeout": {"type": "int", "default": 30},
}


class GatewayError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def path(*parts):
    """Admin API path with each part URL-quoted."""
    return "/admin/v1/" + "/".join(quote(str(p), safe="") for p in parts)


class GatewayClient:
    def __init__(self, params):
        self.base = params["gateway_url"].rstrip("/")
        self.token = params["admin_token"]
        self.validate_certs = params["validate_certs"]
        self.ca_path = params.get("ca_path")
        self.timeout = params["timeout"]

    def request(self, method, api_path, body=None, query=None):
        """Returns (status, decoded JSON). 404 is returned, any other error raises GatewayError."""
        url = self.base + api_path + ("?" + urlencode(query) if query else "")
        data = None if body is None else json.dumps(body)
        headers = {"Authorization": "Bearer " + self.token, "Content-Type": "application/json"}
        try:
            resp = open_url(
                url,
                data=data,
                method=method,
                headers=headers,
                validate_certs=self.validate_certs,
                ca_path=self.ca_path,
                timeout=self.timeout,
            )
            return resp.getcode(), json.loads(resp.read() or b"null")
        except HTTPError as err:
            payload = err.read()
            try:
                message = json.loads(payload)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = payload[:300].decode("utf-8", "replace")
            if err.code == 404:
                return 404, {"error": message}
            raise GatewayError(err.code, f"gateway {method} {api_path} answered {err.code}: {message}") from None
        except URLError as err:
            raise GatewayError(0, f"cannot reach the gateway at {self.base}: {err.reason}") from None
