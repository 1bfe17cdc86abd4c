"""OpenAI-style error bodies; every client-visible failure goes through ApiError."""

from __future__ import annotations

import orjson
from aiohttp import web


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
