"""The static engine (playpen.inference.static): pre-allocated KV buffers, rows left-aligned,
one step per (rows, columns) bucket. On a CPU it runs without CUDA graphs; its tokens and
logprobs must be those of the dynamic loop and of plain generate."""
from dataclasses import replace

import pytest
import torch

from rollout_helpers import make_learner
from test_kvcache import RULES, _assert_same, _assert_same_rollout, _continue

from playpen.inference.engine import generate, use_static_engine
from playpen.inference.kvcache import KVCacheStore, PrefillCounts
from playpen.inference.static import (ROW_BUCKETS, StaticDecoder, _bucket_columns, _bucket_rows, static_decoder,
                                      supports_static_decoding)
from playpen.rollouts import SamplingConfig, chat, rollout

STATIC = SamplingConfig(temperature=0.0, max_new_tokens=6, engine="static")
DYNAMIC = replace(STATIC, engine="dynamic")


def _prompts(tokenizer, words):
    return [chat.prompt_ids(tokenizer, [{"role": "user", "content": RULES + w}]) for w in words]


def test_buckets():
    assert [_bucket_rows(n) for n in (1, 3, 5, 64, 65)] == [1, 4, 8, 64, 128]
    assert _bucket_rows(ROW_BUCKETS[-1] + 1) == 2 * ROW_BUCKETS[-1]
    assert [_bucket_columns(n) for n in (1, 256, 257)] == [256, 256, 512]


def test_turns_are_token_exact_with_the_dynamic_loop_and_plain_generate(tiny_pair):
    model, tokenizer = tiny_pair
    prompts = _prompts(tokenizer, ("apple", "a river", "stone", "a very long word list: " + "lamp " * 12))
    static_store, dynamic_store = KVCacheStore(10**9), KVCacheStore(10**9)
    static_counts, dynamic_counts = PrefillCounts(), PrefillCounts()
    decoder = static_decoder(model, graphs=False)
    for turn in range(3):
        plain = generate(model, tokenizer, prompts, DYNAMIC)
        dynamic = generate(model, tokenizer, prompts, DYNAMIC, cache=dynamic_store, conversations=range(4),
                           counts=dynamic_counts)
        static = generate(model, tokenizer, prompts, STATIC, cache=static_store, conversations=range(4),
                          counts=static_counts)
        _assert_same(plain, dynamic)
        _assert_same(plain, static)
        prompts = _continue(tokenizer, prompts, plain, turn)
    # the kept caches the static engine leaves are those of the dynamic loop: same reuse
    assert static_counts.prefilled == dynamic_counts.prefilled and static_counts.reused == dynamic_counts.reused
    assert static_store.num_hits == dynamic_store.num_hits == 8
    for key in dynamic_store._entries:
        a, b = dynamic_store._entries[key], static_store._entries[key]
        assert torch.equal(a.ids, b.ids)
        assert all(torch.allclose(ka, kb, atol=1e-5) and torch.allclose(va, vb, atol=1e-5)
                   for (ka, va), (kb, vb) in zip(a.layers, b.layers))
    # one set of buffers served every turn: 4 rows in a row bucket of 4, no graphs on a CPU
    assert decoder.capacity[0] == 4 and not decoder.graphs and decoder.num_captures == 0
    assert all(step.graph is None for step in decoder.steps.values())


def test_rows_leave_and_the_rest_move_to_smaller_buckets(tiny_pair):
    """Rows with less room stop early; the live ones move to the front slots and the step's
    row bucket shrinks, without changing any row's tokens."""
    model, tokenizer = tiny_pair
    prompts = _prompts(tokenizer, ("a", "bb", "c c c", "dd", "e"))
    budgets = [1, 7, 2, 5, 3]
    decoder = static_decoder(model, graphs=False)
    decoder.steps.clear()
    got = generate(model, tokenizer, prompts, replace(STATIC, max_new_tokens=7), cache=KVCacheStore(10**9),
                   conversations=range(5), budgets=budgets)
    for prompt, budget, gen in zip(prompts, budgets, got):
        (alone,) = generate(model, tokenizer, [prompt], replace(DYNAMIC, max_new_tokens=budget))
        _assert_same([alone], [gen])
        assert len(gen.token_ids) == budget
    # the row with a budget of 1 ends at its first token, before any step: 4 rows in the bucket of 4,
    # then 3 (still 4), 2 after the budget of 3, 1 after the budget of 5
    assert sorted({key[0] for key in decoder.steps}) == [1, 2, 4]


def test_sampled_logprobs_are_those_of_the_sampling_distribution(tiny_pair):
    model, tokenizer = tiny_pair
    prompts = _prompts(tokenizer, ("x", "y z", "w"))
    sampling = replace(STATIC, temperature=0.8, top_k=5)
    torch.manual_seed(3)
    got = generate(model, tokenizer, prompts, sampling, cache=KVCacheStore(10**9), conversations=[0, 1, 2])
    for prompt, gen in zip(prompts, got):
        ids = torch.tensor([prompt + list(gen.token_ids)])
        with torch.no_grad():
            logits = model(ids).logits[0, len(prompt) - 1:-1]
        expected = torch.log_softmax(logits / 0.8, -1).gather(1, torch.tensor(gen.token_ids)[:, None]).squeeze(1)
        assert torch.allclose(expected, torch.tensor(gen.logprobs), atol=1e-4)
        assert all(int(t) in logits[i].topk(5).indices.tolist() for i, t in enumerate(gen.token_ids))


def test_one_adapter_for_every_row_and_eager_attention(tiny_model_dir):
    """A peft model answered with one named adapter (not the active one), and a model
    whose attention adds its mask to the scores."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    torch.manual_seed(0)
    config = LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, attn_implementation="eager")
    model = get_peft_model(base, config, adapter_name="alice")
    model.add_adapter("bob", config)
    prompts = _prompts(tokenizer, ("a", "b", "c"))
    assert supports_static_decoding(model, ["bob"] * 3) and not supports_static_decoding(model, ["alice", "bob"])
    store = KVCacheStore(10**9)
    for turn in range(2):
        plain = generate(model, tokenizer, prompts, DYNAMIC, adapter_names=["bob"] * 3)
        static = generate(model, tokenizer, prompts, STATIC, adapter_names=["bob"] * 3, cache=store,
                          conversations=[0, 1, 2])
        _assert_same(plain, static)
        alice = generate(model, tokenizer, prompts, DYNAMIC, adapter_names=["alice"] * 3)
        assert [g.token_ids for g in alice] != [g.token_ids for g in plain]  # the adapter mattered
        prompts = _continue(tokenizer, prompts, plain, turn)
    assert static_decoder(model).additive_mask


def test_engine_choice(tiny_pair):
    model, _ = tiny_pair
    assert not use_static_engine(model, SamplingConfig(), [None])  # auto on a CPU: the dynamic loop
    assert use_static_engine(model, STATIC, [None]) and not use_static_engine(model, DYNAMIC, [None])
    assert not use_static_engine(model, STATIC, ["a", "b"])  # several adapters: peft's mixed batch
    with pytest.raises(ValueError, match="unknown engine 'fast'; valid: auto, static, dynamic, vllm"):
        use_static_engine(model, replace(STATIC, engine="fast"), [None])


def test_buffers_grow_for_longer_calls_and_release(tiny_pair):
    model, tokenizer = tiny_pair
    decoder = StaticDecoder(model, graphs=False)
    prompts = _prompts(tokenizer, ("a",))
    from playpen.inference.prefill import prefill
    was_training = model.training  # the shared model may come from a test that trained it
    model.eval()
    logits, full = prefill(model, [[]], prompts, [None], PrefillCounts())
    decoder.decode(model, tokenizer, prompts, logits, full, DYNAMIC, [3], [None], KVCacheStore(10**9), [0],
                   [(id(model), None)])
    assert decoder.capacity == (1, 256)
    long_prompt = [prompts[0] + [prompts[0][-1]] * 300]
    logits, full = prefill(model, [[]], long_prompt, [None], PrefillCounts())
    decoder.decode(model, tokenizer, long_prompt, logits, full, DYNAMIC, [3], [None], KVCacheStore(10**9), [0],
                   [(id(model), None)])
    assert decoder.capacity == (1, 512) and decoder.keys[0].shape[2] == 512
    decoder.release()
    assert decoder.keys == [] and decoder.steps == {} and decoder.capacity == (0, 0)
    model.train(was_training)


def _play(tiny_pair, engine):
    learner = make_learner(tiny_pair, temperature=0.0, max_new_tokens=5)
    learner = replace(learner, sampling=replace(learner.sampling, engine=engine))
    return rollout("relay", learner, partners={"Listener": "programmatic"},
                   instances=lambda row: row["experiment"]["name"] == "lenient", records_dir=None,
                   kv_cache_mb=1024.0)


def test_multi_turn_rollout_is_token_exact(toy_workspace, tiny_pair):
    dynamic, static = _play(tiny_pair, "dynamic"), _play(tiny_pair, "static")
    assert all(t.num_turns == 4 for t in static.trajectories)
    _assert_same_rollout(dynamic, static)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU (run on the device machine)")
def test_captured_steps_on_cuda_match_the_dynamic_loop(tiny_model_dir):
    """On a GPU (benchmarks/scale.py's device runs call this file): replayed graphs give the
    dynamic loop's tokens."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).cuda()
    prompts = _prompts(tokenizer, ("apple", "a river", "stone"))
    store = KVCacheStore(10**9)
    for turn in range(3):
        plain = generate(model, tokenizer, prompts, DYNAMIC)
        static = generate(model, tokenizer, prompts, replace(STATIC, engine="auto"), cache=store,
                          conversations=range(3))
        _assert_same(plain, static)
        prompts = _continue(tokenizer, prompts, plain, turn)
    decoder = static_decoder(model)
    assert decoder.graphs and decoder.num_captures >= 1
    assert all(step.graph is not None for step in decoder.steps.values())


def test_merged_adapter_decodes_like_peft_and_leaves_the_weights_alone(tiny_model_dir):
    """Merged decoding (the GPU default): the adapter folded into a copy of the weights for
    the steps; the same tokens as peft's own path, refreshed when the adapter changes, and
    the model's weights and adapter switches as they were."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    torch.manual_seed(0)
    config = LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir), config, adapter_name="alice")
    model.add_adapter("bob", config)
    decoder = static_decoder(model, graphs=False, merge_lora=True)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    # (peft's mixed-batch path may re-seat the LoRA weights as views of stacks; the base stays put)
    pointers = {n: p.data_ptr() for n, p in model.named_parameters() if "lora_" not in n}
    prompts = _prompts(tokenizer, ("a", "b", "c"))
    for adapter in ("bob", "alice", "__base__"):
        plain = generate(model, tokenizer, prompts, DYNAMIC, adapter_names=[adapter] * 3)
        static = generate(model, tokenizer, prompts, STATIC, adapter_names=[adapter] * 3, cache=KVCacheStore(10**9),
                          conversations=[0, 1, 2])
        _assert_same(plain, static)
        assert decoder.merge and decoder.merged_adapter == adapter and len(decoder.lora) == 14  # 2 layers x 7
    # the adapter trains between calls: the next call merges the new weights
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B.bob" in name:
                param.mul_(-3.0)
    plain = generate(model, tokenizer, prompts, DYNAMIC, adapter_names=["bob"] * 3)
    _assert_same(plain, generate(model, tokenizer, prompts, STATIC, adapter_names=["bob"] * 3,
                                 cache=KVCacheStore(10**9), conversations=[0, 1, 2]))
    assert {n: p.data_ptr() for n, p in model.named_parameters() if "lora_" not in n} == pointers
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters() if "lora_B.bob" not in n)
    assert not any(m._disable_adapters for m in model.modules() if hasattr(m, "_disable_adapters"))


COMPILED = replace(STATIC, compile_decode=True)


def test_a_step_that_cannot_be_compiled_decodes_eager_with_one_warning(tiny_model_dir):
    """compile_decode reaches torch.compile; a forward Dynamo cannot trace whole (here a
    hook that keeps some hidden values as a list, as a monitoring hook might) turns compiling
    off for the decoder with one warning, and the rows get the eager steps' tokens."""
    import warnings
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    seen = []
    model.model.layers[0].register_forward_pre_hook(lambda module, args: seen.append(args[0][0, -1, :2].tolist()))
    prompts = _prompts(tokenizer, ("apple", "a river"))
    eager = generate(model, tokenizer, prompts, STATIC, cache=KVCacheStore(10**9), conversations=range(2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            compiled = generate(model, tokenizer, prompts, COMPILED, cache=KVCacheStore(10**9), conversations=range(2))
            _assert_same(eager, compiled)
    decoder = static_decoder(model)
    assert [str(w.message) for w in caught if str(w.message).startswith("playpen:")] == [
        f"playpen: decoding without torch.compile, the model's step could not be compiled ({decoder.compile_error})"]
    assert "Unsupported" in decoder.compile_error and decoder.num_compiles == 0
    assert not any(step.compiled for step in decoder.steps.values()) and len(seen) > 10


@pytest.mark.slow
def test_compiled_steps_give_the_eager_tokens_and_compile_once(tiny_model_dir):
    """torch.compile'd steps (inductor's C++ kernels on a CPU): the tokens and logprobs of the
    eager static steps and of the dynamic loop, greedy and sampled, rows ending at different
    lengths; calls of other sizes reuse the compiled graphs (one for buckets of 2+ rows, one
    for a bucket of one row). ~1-2 minutes on a loaded 2-core CPU with cold compile caches."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    decoder = static_decoder(model, graphs=False)
    words = ("a", "bb", "c c c", "dd", "e")
    calls = [([1, 7, 2, 5, 3], 0.0), ([7, 7, 7, 7, 7], 0.0), ([4, 2, 6], 0.9), ([3, 5], 0.9), ([6] * 5, 0.9)]

    def decode(sampling, budgets, temperature):
        prompts = _prompts(tokenizer, words[:len(budgets)])
        torch.manual_seed(11)
        return generate(model, tokenizer, prompts, replace(sampling, temperature=temperature, max_new_tokens=7),
                        cache=KVCacheStore(10**9), conversations=range(len(prompts)), budgets=budgets)

    for round_ in range(2):
        for budgets, temperature in calls:
            compiled = decode(COMPILED, budgets, temperature)
            _assert_same(decode(STATIC, budgets, temperature), compiled)
            _assert_same(decode(DYNAMIC, budgets, temperature), compiled)
            assert [len(g.token_ids) for g in compiled] == budgets
        if round_ == 0:
            compiles, compiled_steps = decoder.num_compiles, sorted(key[:2] for key in decoder.steps if key[-1])
    # buckets of 4, 2 and 1 rows (and 8 for the call of 5): all compiled steps, two graphs
    assert compiled_steps == [(1, 256), (2, 256), (4, 256), (8, 256)]
    assert compiles == decoder.num_compiles == 2 and decoder.compile_error is None and decoder.compile_seconds > 0
