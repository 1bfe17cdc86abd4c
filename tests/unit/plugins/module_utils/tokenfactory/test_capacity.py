"""Capacity estimator: arithmetic against hand-computed values and the fit/supply policies."""

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory import capacity as cap

from tests.unit.plugins.module_utils.tokenfactory.samples import QWEN_05B

GIB = 2**30
LLAMA_70B = cap.known_architecture("meta-llama/Llama-3.3-70B-Instruct")
GB10_MEMORY = 119 * GIB


def test_weights_follow_parameter_count_and_dtype():
    assert cap.weights_bytes(QWEN_05B["architecture"]) == 988_000_000  # 0.494e9 x 2 bytes
    fp4 = dict(LLAMA_70B, dtype="nvfp4")
    assert cap.weights_bytes(fp4) == int(70.6e9 * 0.5625)


def test_kv_cache_per_token_is_2_layers_heads_dim_bytes():
    # Qwen2-0.5B: 2 (K and V) x 24 layers x 2 KV heads x 64 dims x 2 bytes
    assert cap.kv_bytes_per_token(QWEN_05B["architecture"]) == 12_288
    assert cap.kv_bytes_per_token(QWEN_05B["architecture"], "fp8") == 6_144
    assert cap.kv_bytes_per_token(LLAMA_70B) == 327_680


def test_estimate_splits_weights_and_kv_over_the_replica_gpus():
    one = cap.estimate(LLAMA_70B, 8192, sequences=2, gpus_per_replica=1)
    two = cap.estimate(LLAMA_70B, 8192, sequences=2, gpus_per_replica=2)
    assert one["kvCacheBytes"] == 327_680 * 8192 * 2
    assert two["weightsBytesPerGPU"] == -(-one["weightsBytes"] // 2)
    assert two["kvCacheBytesPerGPU"] == one["kvCacheBytesPerGPU"] // 2
    assert one["requiredBytesPerGPU"] == one["weightsBytes"] + one["kvCacheBytes"] + cap.RUNTIME_OVERHEAD_BYTES


def test_small_model_fits_a_spark():
    needs = cap.estimate(QWEN_05B["architecture"], 32768)
    usable = cap.check_fit(needs, GB10_MEMORY, 0.75, "NVIDIA-GB10", True, 32768, 1, 1)
    assert usable == int(GB10_MEMORY * 0.75)


def test_bf16_70b_does_not_fit_one_spark_and_the_message_explains_why():
    needs = cap.estimate(LLAMA_70B, 131072)
    with pytest.raises(cap.CapacityError) as err:
        cap.check_fit(needs, GB10_MEMORY, 0.75, "NVIDIA-GB10", True, 131072, 1, 1)
    message = str(err.value)
    assert message.startswith("capacity: the model does not fit on NVIDIA-GB10")
    assert "weights 131.5 GiB" in message
    assert "KV cache for 1 x 131072 tokens 40.0 GiB" in message
    assert "89.2 GiB is usable (0.75 x 119.0 GiB unified memory shared with the OS)" in message
    assert "Lower context_length" in message


def test_fp4_70b_fits_two_paired_sparks_but_not_one():
    fp4 = cap.known_architecture("nvidia/Llama-3.3-70B-Instruct-FP4")
    two = cap.estimate(fp4, 32768, gpus_per_replica=2)
    cap.check_fit(two, GB10_MEMORY, 0.75, "NVIDIA-GB10", True, 32768, 1, 2)
    one = cap.estimate(fp4, 131072, sequences=4)
    with pytest.raises(cap.CapacityError):
        cap.check_fit(one, GB10_MEMORY, 0.75, "NVIDIA-GB10", True, 131072, 4, 1)


@pytest.mark.parametrize(
    ("requested", "unified", "expected"),
    [(None, True, 0.75), (None, False, 0.90), (0.85, True, 0.85), (0.95, False, 0.95), (0.05, True, 0.05)],
)
def test_utilization_defaults_and_accepted_values(requested, unified, expected):
    assert cap.resolve_utilization(requested, unified, "GPU") == expected


@pytest.mark.parametrize(("requested", "unified"), [(0.9, True), (0.96, False), (0.01, False)])
def test_utilization_outside_the_safe_range_is_refused(requested, unified):
    with pytest.raises(cap.CapacityError, match=r"gpu_memory_utilization: .* allowed 0\.05\.\.0\.(85|95)"):
        cap.resolve_utilization(requested, unified, "NVIDIA-GB10")


def test_gpu_supply_fail_and_queue_policies():
    assert cap.check_gpu_supply("NVIDIA-GB10", 1, 1, 0, "fail") == ""
    with pytest.raises(
        cap.CapacityError, match=r"needs 1 x NVIDIA-GB10 .* 1 allocatable and 1 already claimed .*0 free"
    ):
        cap.check_gpu_supply("NVIDIA-GB10", 1, 1, 1, "fail")
    note = cap.check_gpu_supply("NVIDIA-GB10", 1, 1, 1, "queue")
    assert note.startswith("queued: needs 1 x NVIDIA-GB10")


def test_known_architecture_is_none_for_unknown_models():
    assert cap.known_architecture("someone/unknown") is None
    assert cap.known_architecture("Qwen/Qwen2-0.5B-Instruct") == QWEN_05B["architecture"]
