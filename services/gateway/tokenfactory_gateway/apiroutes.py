"""The OpenAI routes the gateway proxies, each with the usage shape it is metered by; every other /v1 route is
refused with a 404 (never forwarded unmetered).

Chat and text completions stream (sse.py meters their chunks); embeddings and responses are metered from the
`usage` object of their JSON body: embeddings bill `prompt_tokens` (no completion), responses `input_tokens` and
`output_tokens`. A streamed /v1/responses call is refused: its event stream carries usage in another shape
(`response.completed`) that this gateway does not meter.
"""

from __future__ import annotations

import orjson

from .errors import ApiError
from .sse import MAX_USAGE_TOKENS, usage_of

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
EMBEDDINGS = "/v1/embeddings"
RESPONSES = "/v1/responses"
STREAMING = (CHAT, COMPLETIONS)
USAGE_FIELDS = {EMBEDDINGS: ("prompt_tokens", None), RESPONSES: ("input_tokens", "output_tokens")}
PROXIED = (CHAT, COMPLETIONS, EMBEDDINGS, RESPONSES)


def check_route(route: str, payload: dict) -> None:
    """Refuse what the route cannot meter (a stream outside chat/completions)."""
    if route not in STREAMING and payload.get("stream") is True:
        raise ApiError(400, f"'stream' is not supported on {route} through this gateway (its usage could not be "
                       "metered); send the request without it.", param="stream", code="unsupported_value")  # fmt: skip


def usage_of_route(route: str, body: bytes) -> tuple[int, int] | None:
    """(prompt, completion) of a non-streamed response of `route`; None when missing or not valid."""
    if route not in USAGE_FIELDS:
        return usage_of(body)
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    usage = obj.get("usage") if isinstance(obj, dict) else None
    if not isinstance(usage, dict):
        return None
    counts = [0 if name is None else usage.get(name) for name in USAGE_FIELDS[route]]
    if not all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= MAX_USAGE_TOKENS for c in counts):
        return None
    return counts[0], counts[1]


def unknown_route(method: str, path: str) -> ApiError:
    served = ", ".join(f"POST {r}" for r in PROXIED)
    return ApiError(404, f"{method} {path} is not served by this gateway (served: {served}, GET /v1/models, "
                    "GET /v1/usage).", code="unknown_route")  # fmt: skip
