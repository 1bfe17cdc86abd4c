"""Request fields that change what is metered, checked and normalised as the OpenAI API defines them.

`stream`, `stream_options`, `max_tokens`, `max_completion_tokens` and `n` are checked before anything is
proxied; null means the default (the field is dropped). The gateway forwards the object it checked, never the
raw bytes (duplicate keys are read differently by different JSON parsers).
"""

from __future__ import annotations

import dataclasses

from .errors import ApiError, invalid_type

MAX_N = 128  # OpenAI's bound for `n`
MAX_TOKENS = 2**31 - 1
STREAM_OPTIONS = ("include_usage", "continuous_usage_stats", "include_obfuscation")  # OpenAI's and vLLM's
NULLABLE = ("stream", "stream_options", "max_tokens", "max_completion_tokens", "n")


@dataclasses.dataclass(frozen=True, slots=True)
class Metered:
    stream: bool
    wants_usage: bool  # the client asked for the final usage chunk
    wants_running_usage: bool  # ... and for usage on every chunk (vLLM's continuous_usage_stats)


def check(payload: dict) -> Metered:
    """Validate and normalise `payload` in place; OpenAI-style 400 naming the field otherwise."""
    for name in NULLABLE:
        if name in payload and payload[name] is None:
            del payload[name]
    stream = payload.get("stream", False)
    if not isinstance(stream, bool):
        raise invalid_type("stream", "a boolean", stream)
    options = payload.get("stream_options", {})
    if not isinstance(options, dict):
        raise invalid_type("stream_options", "an object", options)
    if "stream_options" in payload and not stream:
        raise ApiError(400, "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                       param="stream_options", code="invalid_value")  # fmt: skip
    for name, value in options.items():
        if name not in STREAM_OPTIONS:
            raise ApiError(400, f"Unrecognized stream option '{name}'; allowed: {', '.join(STREAM_OPTIONS)}.",
                           param=f"stream_options.{name}", code="unknown_parameter")  # fmt: skip
        if not isinstance(value, bool):
            raise invalid_type(f"stream_options.{name}", "a boolean", value)
    for name, high in (("max_tokens", MAX_TOKENS), ("max_completion_tokens", MAX_TOKENS), ("n", MAX_N)):
        if name in payload:
            _integer(name, payload[name], 1, high)
    wants_usage = stream and options.get("include_usage") is True
    return Metered(stream, wants_usage, wants_usage and options.get("continuous_usage_stats") is True)


def _integer(name, value, low, high) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise invalid_type(name, "an integer", value)
    if value < low:
        raise ApiError(400, f"Invalid '{name}': integer below minimum value. Expected a value >= {low}, but got "
                       f"{value} instead.", param=name, code="integer_below_min_value")  # fmt: skip
    if value > high:
        raise ApiError(400, f"Invalid '{name}': integer above maximum value. Expected a value <= {high}, but got "
                       f"{value} instead.", param=name, code="integer_above_max_value")  # fmt: skip
