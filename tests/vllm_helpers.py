"""Helpers of the vLLM tests (plain functions; each test module builds its own engine or server)."""
import pytest
import torch

from playpen.inference import vllm_engine
from playpen.inference.engine import generate
from playpen.inference.kvcache import KVCacheStore
from playpen.rollouts import SamplingConfig, chat

# fp32 on both sides; vLLM's CPU attention and matmuls sum in another order than torch's eager
# forward, so logprobs agree up to float noise, far below any difference a sampled token makes
LOGPROB_TOLERANCE = 1e-3
VLLM = SamplingConfig(temperature=0.0, max_new_tokens=8, engine="vllm")
PLAYPEN = SamplingConfig(temperature=0.0, max_new_tokens=8, engine="dynamic")


# a module that imports it gets it autouse: a small KV cache, and its engine shut down at the end
@pytest.fixture(scope="module", autouse=True)
def small_kv_cache():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
        yield
    vllm_engine.shutdown()


def make_vllm_model(out):
    """A tiny random Llama vLLM's CPU attention can run (head size 32, its smallest), with the
    real SmolLM2 tokenizer, saved in ``out``; weights drawn wide enough that greedy choices
    are never near ties."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
    from playpen.default_model import prepare_default_model
    tokenizer = AutoTokenizer.from_pretrained(prepare_default_model())
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=2048,
                         tie_word_embeddings=True, initializer_range=0.2, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def prompts_of(tokenizer, n=3):
    return [chat.prompt_ids(tokenizer, [{"role": "user", "content": f"Say something about number {i}."}])
            for i in range(n)]


def assert_same(ours, theirs):
    for a, b in zip(ours, theirs, strict=True):
        assert a.token_ids == b.token_ids and a.finished == b.finished and a.text == b.text
        assert max((abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)), default=0) < LOGPROB_TOLERANCE


def playpen_answers(model, tokenizer, prompts, names=None):
    return generate(model, tokenizer, prompts, PLAYPEN, adapter_names=names, cache=KVCacheStore(10**9),
                    conversations=list(range(len(prompts))))



def requests_answered() -> int:
    """How many prompts the process's in-process vLLM engines were asked so far."""
    return sum(backend.llm.request_counter.counter for key, (backend, _) in vllm_engine._BACKENDS.items()
               if key[0] == "local")
