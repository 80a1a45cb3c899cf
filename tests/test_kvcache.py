"""KV caches kept between turns: same tokens and logprobs as re-prefilling, fewer prefilled
positions, rows leaving the decode batch, eviction under a cap, caches freed at the end."""
import pytest
import torch

from rollout_helpers import make_learner

from playpen.rollouts import SamplingConfig, chat, rollout
from playpen.inference.engine import generate, generate_within
from playpen.inference.kvcache import KVCacheStore, PrefillCounts

RULES = "Here are the rules of the game. Answer in one line and keep to the format. " * 3


def _assert_same(plain, cached):
    for a, b in zip(plain, cached, strict=True):
        assert a.token_ids == b.token_ids
        assert a.finished == b.finished and a.text == b.text
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < 1e-4


def _continue(tokenizer, prompts, generations, turn):
    feedback = [{"role": "user", "content": f"Feedback {turn}: that was not it, try again."}]
    return [p + list(g.token_ids) + chat.continuation_ids(tokenizer, feedback, g.token_ids[-1])
            for p, g in zip(prompts, generations)]


def test_turns_continue_their_cache_token_exact(tiny_pair):
    model, tokenizer = tiny_pair
    prompts = [chat.prompt_ids(tokenizer, [{"role": "user", "content": RULES + word}])
               for word in ("apple", "a river", "stone", "a very long word list: " + "lamp " * 12)]
    store, plain_counts, cached_counts = KVCacheStore(10**9), PrefillCounts(), PrefillCounts()
    sampling = SamplingConfig(temperature=0.0, max_new_tokens=6)
    per_turn = []
    for turn in range(4):
        before = cached_counts.prefilled
        plain = generate(model, tokenizer, prompts, sampling, counts=plain_counts)
        cached = generate(model, tokenizer, prompts, sampling, cache=store, conversations=range(4),
                          counts=cached_counts)
        _assert_same(plain, cached)
        per_turn.append(cached_counts.prefilled - before)
        assert len(store) == 4 and store.num_bytes > 0
        prompts = _continue(tokenizer, prompts, plain, turn)
    # every prompt token is either prefilled or reused, in both paths
    total = plain_counts.prefilled + plain_counts.reused
    assert cached_counts.prefilled + cached_counts.reused == total
    # after the first turn a row prefills only its last generated token and the feedback
    # (a turn cut at max_new_tokens, as here, is closed by the continuation's <|im_end|>)
    feedback = len(chat.continuation_ids(tokenizer, [{"role": "user", "content": "Feedback 0: that was not it, "
                                                                                 "try again."}], None))
    assert per_turn[1:] == [4 * (feedback + 1)] * 3
    assert cached_counts.prefilled < plain_counts.prefilled / 2
    assert store.num_hits == 12


@pytest.mark.parametrize("top_k, top_p", [(1, None), (None, 1e-6), (5, 0.9)])
def test_sampling_filters(tiny_pair, top_k, top_p):
    model, tokenizer = tiny_pair
    prompts = [chat.prompt_ids(tokenizer, [{"role": "user", "content": RULES + w}]) for w in ("x", "y z")]
    sampling = SamplingConfig(temperature=0.8, max_new_tokens=5, top_k=top_k, top_p=top_p)
    torch.manual_seed(3)
    cached = generate(model, tokenizer, prompts, sampling, cache=KVCacheStore(10**9), conversations=[0, 1])
    if top_k == 1 or top_p == 1e-6:  # one token left: sampling is greedy, logprobs still at T = 0.8
        greedy = generate(model, tokenizer, prompts, SamplingConfig(temperature=0.0, max_new_tokens=5))
        assert [g.token_ids for g in cached] == [g.token_ids for g in greedy]
    for prompt, gen in zip(prompts, cached):  # logprobs: log_softmax(logits / T) of the chosen token
        ids = torch.tensor([prompt + list(gen.token_ids)])
        with torch.no_grad():
            logits = model(ids).logits[0, len(prompt) - 1:-1]
        expected = torch.log_softmax(logits / 0.8, -1).gather(1, torch.tensor(gen.token_ids)[:, None]).squeeze(1)
        assert torch.allclose(expected, torch.tensor(gen.logprobs), atol=1e-4)
        if top_k == 5:  # every sampled token is among the 5 most likely
            assert all(int(t) in logits[i].topk(5).indices.tolist() for i, t in enumerate(gen.token_ids))


def test_rows_leave_the_decode_batch(tiny_pair):
    """Rows with less room stop early and leave the batch; the others' tokens are unchanged."""
    model, tokenizer = tiny_pair
    prompts = [chat.prompt_ids(tokenizer, [{"role": "user", "content": RULES + w}]) for w in ("a", "bb", "c c c")]
    sizes = []
    hook = model.register_forward_pre_hook(
        lambda module, args, kwargs: sizes.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True)
    try:
        cached = generate(model, tokenizer, prompts, SamplingConfig(0.0, 8), cache=KVCacheStore(10**9),
                          conversations=[0, 1, 2], budgets=[2, 8, 5])
    finally:
        hook.remove()
    assert [len(g.token_ids) for g in cached] == [2, 8, 5]
    decode = [rows for rows, width in sizes if width == 1]
    assert decode == [3] * 1 + [2] * 3 + [1] * 3  # 7 decode steps for 8 tokens, rows leaving
    alone = [generate(model, tokenizer, [p], SamplingConfig(0.0, n))[0] for p, n in zip(prompts, (2, 8, 5))]
    _assert_same(alone, cached)


def test_context_window_gives_each_row_its_room(tiny_pair):
    model, tokenizer = tiny_pair
    long = list(range(100, 100 + 2040))
    prompts = [long, long[:30], list(range(100, 100 + 2048))]  # the tiny model holds 2048 positions
    plain, plain_calls = generate_within(model, tokenizer, prompts, SamplingConfig(0.0, 12))
    cached, calls = generate_within(model, tokenizer, prompts, SamplingConfig(0.0, 12),
                                    cache=KVCacheStore(10**9), conversations=[0, 1, 2])
    assert (plain_calls, calls) == (2, 1)
    assert cached[2] is None and plain[2] is None
    assert len(cached[0].token_ids) == 8 and len(cached[1].token_ids) == 12
    _assert_same(plain[:2], cached[:2])


def test_store_evicts_least_recently_used_and_verifies_tokens():
    def layers(n):
        return [(torch.zeros(2, n, 4), torch.zeros(2, n, 4))]  # 2 x 2 x n x 4 x 4 bytes = 64 n bytes
    store = KVCacheStore(max_bytes=64 * 50)
    store.put("a", None, list(range(20)), layers(20))
    store.put("b", None, list(range(1, 21)), layers(20))
    assert store.lookup("a", None, list(range(30)))[0] == 20  # touches a: b is now the oldest
    store.put("c", None, list(range(2, 22)), layers(20))  # 60 entries' worth: b goes
    assert len(store) == 2 and store.num_evictions == 1 and store.num_bytes == 64 * 40
    assert store.lookup("b", None, list(range(1, 30)))[0] == 0  # evicted: a miss
    # a prompt that differs after 17 tokens reuses 17; a shorter prompt all but its last token
    assert store.lookup("a", None, list(range(17)) + [99, 100])[0] == 17
    assert store.lookup("a", None, list(range(18)))[0] == 17
    assert store.lookup("a", "other-adapter", list(range(30)))[0] == 0  # another adapter's cache: no
    store.put("big", None, list(range(60)), layers(60))  # larger than the cap: not kept
    assert "big" not in {key[0] for key in store._entries}
    store.drop("a")
    store.drop("c")
    assert len(store) == 0 and store.num_bytes == 0


class _Stores:
    """Records the KVCacheStore every rollout creates (the real class, unchanged)."""

    def __init__(self, monkeypatch):
        import playpen.rollouts.lockstep as loop  # where the lock-step loop makes its stores
        self.made = []
        real = loop.KVCacheStore

        def make(*args, **kwargs):
            store = real(*args, **kwargs)
            self.made.append(store)
            return store
        monkeypatch.setattr(loop, "KVCacheStore", make)


def _play(tiny_pair, **kwargs):
    kwargs.setdefault("kv_cache_mb", 1024.0)
    return rollout("relay", make_learner(tiny_pair, temperature=0.0, max_new_tokens=5),
                   partners={"Listener": "programmatic"},
                   instances=lambda row: row["experiment"]["name"] == "lenient", records_dir=None, **kwargs)


def _assert_same_rollout(plain, cached):
    assert [e.outcome for e in plain.episodes] == [e.outcome for e in cached.episodes]
    for a, b in zip(plain.trajectories, cached.trajectories, strict=True):
        assert a.prompt_ids == b.prompt_ids and a.completion_ids == b.completion_ids and a.env_mask == b.env_mask
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) < 1e-4


def test_multi_turn_rollout_is_token_exact_and_prefills_less(toy_workspace, tiny_pair, monkeypatch):
    stores = _Stores(monkeypatch)
    plain = _play(tiny_pair, kv_cache_mb=0)
    cached = _play(tiny_pair)
    # one conversation's cache is ~50-100 kB on the tiny model: 0.12 MB holds one or two of them
    capped = _play(tiny_pair, kv_cache_mb=0.12)
    assert len(stores.made) == 2  # kv_cache_mb=0: no store
    assert all(t.num_turns == 4 for t in plain.trajectories)  # 1 + 3 re-prompts each
    _assert_same_rollout(plain, cached)
    _assert_same_rollout(plain, capped)
    prompt_tokens = plain.stats.num_prefill_tokens + plain.stats.num_reused_tokens
    assert cached.stats.num_prefill_tokens + cached.stats.num_reused_tokens == prompt_tokens
    assert cached.stats.num_prefill_tokens < plain.stats.num_prefill_tokens / 2
    assert cached.stats.as_metrics()["rollout/prefill_tokens"] == cached.stats.num_prefill_tokens
    store, small = stores.made
    assert store.num_hits == 9 and store.num_evictions == 0  # turns 2-4 of 3 episodes
    assert len(store) == 0 and store.num_bytes == 0 and store.peak_entries == 3
    # under the cap: evictions, and what no kept cache covers is prefilled again
    assert small.num_evictions > 0 and small.peak_bytes <= 0.12 * 2**20 and len(small) == 0
    assert plain.stats.num_prefill_tokens > capped.stats.num_prefill_tokens > cached.stats.num_prefill_tokens


def test_caches_of_finished_episodes_are_freed(toy_workspace, tiny_pair, monkeypatch):
    stores = _Stores(monkeypatch)
    _play(tiny_pair, max_concurrent_episodes=1)
    (store,) = stores.made
    assert store.peak_entries == 1 and store.num_hits == 9  # one episode at a time, its cache freed at its end
    assert len(store) == 0 and store.num_bytes == 0


def test_a_negative_cap_is_refused(toy_workspace, tiny_pair):
    from playpen.errors import RolloutError
    with pytest.raises(RolloutError, match="kv_cache_mb must be >= 0"):
        _play(tiny_pair, kv_cache_mb=-1)


def test_adapters_keep_caches_of_their_own(tiny_model_dir):
    """Rows of several LoRA adapters in one batch: each continues only a cache its adapter made."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    torch.manual_seed(0)
    config = LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir), config, adapter_name="alice")
    model.add_adapter("bob", config)
    prompts = [chat.prompt_ids(tokenizer, [{"role": "user", "content": RULES + w}]) for w in ("a", "b", "c")]
    names = ["alice", "bob", "__base__"]
    store, sampling = KVCacheStore(10**9), SamplingConfig(temperature=0.0, max_new_tokens=5)
    for turn in range(2):
        plain = generate(model, tokenizer, prompts, sampling, adapter_names=names)
        cached = generate(model, tokenizer, prompts, sampling, adapter_names=names, cache=store,
                          conversations=[0, 1, 2])
        _assert_same(plain, cached)
        prompts = _continue(tokenizer, prompts, plain, turn)
    assert store.num_hits == 3
    # the same conversations answered by other adapters: their caches do not fit, nothing is reused
    swapped = ["bob", "__base__", "alice"]
    counts = PrefillCounts()
    cached = generate(model, tokenizer, prompts, sampling, adapter_names=swapped, cache=store,
                      conversations=[0, 1, 2], counts=counts)
    _assert_same(generate(model, tokenizer, prompts, sampling, adapter_names=swapped), cached)
    # at most the start the conversations have in common (another conversation of the same adapter)
    common = next(i for i, (a, b) in enumerate(zip(prompts[0], prompts[1])) if a != b)
    assert counts.reused <= 3 * common


def test_forked_episodes_continue_their_parents_cache(toy_workspace, tiny_pair, monkeypatch):
    from playpen.rollouts import Branching
    stores = _Stores(monkeypatch)
    fork = Branching(factor=2, condition=lambda point: point.learner_turn == 2)  # after two turns
    plain = _play(tiny_pair, kv_cache_mb=0, branching=fork)
    cached = _play(tiny_pair, branching=fork)
    assert len(cached.episodes) == 6
    _assert_same_rollout(plain, cached)
    (store,) = stores.made
    # turns 2-4 of the 3 parents (9) and turns 3-4 of the 3 children (6), the first from the parent's cache
    assert store.num_hits == 15 and store.num_misses == 3
    assert cached.stats.num_prefill_tokens < plain.stats.num_prefill_tokens / 2
    assert len(store) == 0


def test_slab_layer_appends_in_place_and_grows_like_a_concatenation():
    import torch
    from playpen.inference.kvcache import _SlabLayer
    torch.manual_seed(0)
    keys, values = torch.randn(3, 2, 5, 4), torch.randn(3, 2, 5, 4)
    buffer_k, buffer_v = torch.zeros(3, 2, 7, 4), torch.zeros(3, 2, 7, 4)
    buffer_k[:, :, :5], buffer_v[:, :, :5] = keys, values
    layer = _SlabLayer(buffer_k, buffer_v, 5)
    expected_k, expected_v = keys, values
    for step in range(6):  # past the 2 spare positions: the buffers grow
        new_k, new_v = torch.randn(3, 2, 1 + step % 2, 4), torch.randn(3, 2, 1 + step % 2, 4)
        out_k, out_v = layer.update(new_k, new_v)
        expected_k, expected_v = torch.cat([expected_k, new_k], 2), torch.cat([expected_v, new_v], 2)
        assert torch.equal(out_k, expected_k) and torch.equal(out_v, expected_v)
        assert layer.get_seq_length() == expected_k.shape[2]
    layer.drop_leading(3)
    layer.batch_select_indices(torch.tensor([2, 0]))
    assert torch.equal(layer.keys, expected_k[[2, 0], :, 3:])
    out_k, _ = layer.update(torch.ones(2, 2, 1, 4), torch.ones(2, 2, 1, 4))
    assert torch.equal(out_k[:, :, :-1], expected_k[[2, 0], :, 3:]) and bool((out_k[:, :, -1] == 1).all())
