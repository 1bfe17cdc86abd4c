"""OpenAI-style error bodies; every client-visible failure goes through ApiError."""

from __future__ import annotations

import orjson
from aiohttp import web
from aiohttp.http_exceptions import LineTooLong


class ApiError(Exception):
    """An error answered to the client as `{"error": {...}}` with the given HTTP status."""

    def __init__(self, status, message, err_type="invalid_request_error", code=None, param=None, headers=None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.err_type = err_type
        self.code = code
        self.param = param
        self.headers = headers or {}

    def body(self) -> bytes:
        return error_body(self.message, self.err_type, self.code, self.param)

    def response(self) -> web.Response:
        return web.Response(status=self.status, body=self.body(), content_type="application/json", headers=self.headers)


def error_body(message, err_type, code=None, param=None) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": err_type, "param": param, "code": code}})


def invalid_api_key() -> ApiError:
    return ApiError(401, "Incorrect or revoked API key provided.", "invalid_request_error", "invalid_api_key")


def model_not_found(model) -> ApiError:
    # Same answer for "does not exist" and "not shared with your tenant": no existence oracle.
    return ApiError(
        404,
        f"The model `{model}` does not exist or you do not have access to it.",
        "invalid_request_error",
        "model_not_found",
        "model",
    )


def rate_limited(scope, retry_after_s) -> ApiError:
    kind = "tokens" if scope.endswith("tokens") else "requests"
    return ApiError(
        429,
        f"Rate limit reached ({scope}). Please retry after {retry_after_s} s.",
        kind,
        "rate_limit_exceeded",
        headers={"Retry-After": str(retry_after_s)},
    )


def database_unavailable() -> ApiError:
    return ApiError(503, "Database unavailable; retry later.", "service_unavailable", "database_unavailable")


def redis_unavailable(message="Rate limiter unavailable; retry later.") -> ApiError:
    return ApiError(503, message, "service_unavailable", "redis_unavailable")


def invalid_type(param, expected, value) -> ApiError:
    got = {bool: "a boolean", int: "an integer", float: "a decimal number", str: "a string", list: "an array",
           dict: "an object"}.get(type(value), "null" if value is None else type(value).__name__)  # fmt: skip
    return ApiError(400, f"Invalid type for '{param}': expected {expected}, but got {got} instead.",
                    param=param, code="invalid_type")  # fmt: skip


def upstream_usage_invalid() -> ApiError:
    return ApiError(
        502, "The model server reported no valid token usage; the answer cannot be metered.", "api_error",
        "upstream_usage_invalid",
    )  # fmt: skip


def protocol_error(status, exc) -> ApiError:
    """A request aiohttp could not parse (never echoes what was sent: it may carry secrets)."""
    if isinstance(exc, LineTooLong):
        line, limit = exc.args[0], exc.args[1]
        first = line[:1].encode() if isinstance(line, str) else bytes(line[:1])
        if first in (b"/", b"*"):  # a request target (origin or asterisk form)
            return ApiError(414, f"Request line longer than {limit} bytes.", code="request_line_too_long")
        return ApiError(431, f"Request header field longer than {limit} bytes.", code="request_header_too_large")
    if status == 500:
        return ApiError(500, "Internal gateway error.", "api_error", "internal_error")
    if status == 504:
        return ApiError(504, "The gateway timed out handling the request.", "api_error", "gateway_timeout")
    return ApiError(status, "Malformed HTTP request.", code="invalid_http_request")
