"""benchmarks/engines.py: each variant samples with the engine and dtype its name says."""

import pytest

from playpen.inference import vllm_engine


@pytest.fixture(scope="module")
def engines(benchmark_script):
    return benchmark_script("engines")


def test_every_variant_samples_in_the_dtype_its_name_says(engines):
    """vLLM's ``auto`` dtype samples in bf16 on hardware with native bf16 whatever the model's
    dtype: the vllm-fp32 row once measured bf16 (its logprobs 0.034 nats off the trainer's)."""
    for name, (engine, dtype) in engines.VARIANTS.items():
        sampling = engines.variant_sampling(name, 8)
        assert sampling.temperature == 1.0 and sampling.max_new_tokens == 8
        assert sampling.engine == ("dynamic" if engine == "generate" else engine)
        if engine == "vllm":
            for native in (True, False):
                assert vllm_engine.engine_dtype(sampling, "float32", native_bf16=native) == dtype, name
