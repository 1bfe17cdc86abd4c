# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""How close the measured decode rate is to what memory bandwidth allows.

A decode step reads the weights once for the whole batch and each stream's KV cache; it produces one token per
stream. So the bytes read per decoded token are weights / streams + context x KV bytes per token, and no
engine decodes faster than bandwidth / that (per GPU of a tensor-parallel replica, which reads its share).
Measured: streams in flight (Little's law: sum of request times / run time) x 1000 / mean TPOT ms.
Result keys avoid a `_token` suffix: the report drops keys named like credentials (`..._token`).
"""

from __future__ import annotations


def decode_bound(bandwidth_bytes_per_s, weights_bytes, kv_bytes_per_token, context_tokens, streams, gpus=1):
    """(tokens/s upper bound, bytes read per decoded token)."""
    per_token = weights_bytes / max(streams, 1e-9) + context_tokens * kv_bytes_per_token
    return bandwidth_bytes_per_s * gpus / per_token, per_token


def summarize(result, bandwidth_gbps, weights_bytes, kv_bytes_per_token, gpus=1, gpu_type=None):
    """The measured decode rate next to the bound, or the reason it cannot be computed."""
    completed, duration = result.get("completed") or 0, result.get("duration") or 0
    mean_tpot, mean_e2e = result.get("mean_tpot_ms"), result.get("mean_e2el_ms")
    base = {"gpu_type": gpu_type, "memory_bandwidth_gbps": bandwidth_gbps, "gpus": gpus,
            "weights_bytes": weights_bytes, "kv_bytes_per_context_position": kv_bytes_per_token}  # fmt: skip
    if not completed or not duration or not mean_tpot or not mean_e2e:
        return {**base, "computed": False, "reason": "no completed multi-token requests to measure decode on"}
    streams = mean_e2e / 1000 * completed / duration
    context = (result["total_input_tokens"] + result["total_output_tokens"] / 2) / completed
    bound, per_token = decode_bound(bandwidth_gbps * 1e9, weights_bytes, kv_bytes_per_token, context, streams, gpus)
    measured = streams * 1000 / mean_tpot
    return {
        **base,
        "computed": True,
        "streams": streams,
        "context_tokens": context,
        "bytes_read_per_decoded": per_token,
        "decode_tokens_per_s": measured,
        "bound_tokens_per_s": bound,
        "fraction_of_bound": measured / bound,
        # Faster than memory allows: the model served is not the one sized (smaller, quantized), or the bandwidth.
        "above_bound": measured > bound,
    }
