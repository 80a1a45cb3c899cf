"""One door, several engines (playpen.inference.engine): every engine module keeps the one
Engine protocol, the choice table gives each call the engine the door's old chain of ifs
gave it, and one call of the door reads each fact of the model once."""
import inspect
import itertools
import sys
from collections import Counter

import pytest

from rollout_helpers import make_learner

from playpen.inference import dynamic, engine, hf_generate, model_facts, static, transformers_compat, vllm_engine
from playpen.inference.engine import ENGINES, choose_engine
from playpen.inference.types import Engine

ENGINE_MODULES = (static, dynamic, hf_generate, vllm_engine)


@pytest.mark.parametrize("module", ENGINE_MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_every_engine_module_keeps_the_protocol(module):
    assert isinstance(module, Engine)
    assert isinstance(module.CHUNKED, bool) and isinstance(module.PER_ROW_BUDGETS, bool)
    wanted = [(p.name, p.kind) for p in inspect.signature(Engine.generate).parameters.values()][1:]  # no self
    assert [(p.name, p.kind) for p in inspect.signature(module.generate).parameters.values()] == wanted


def test_the_table_names_only_engines_of_the_protocol():
    assert {row[-1] for row in engine.CHOICES} == set(ENGINE_MODULES)
    assert all(row[0] in (None, *ENGINES) for row in engine.CHOICES)


def _chosen_before(option, kv_reuse, cache_given, on_cuda, static_fits):
    """The door's choice before the table (engine.generate, generate_cached and
    use_static_engine of 5953964), written out as it was."""
    if option == "vllm":
        return vllm_engine
    if not (cache_given and kv_reuse):
        return hf_generate
    if option == "dynamic":
        return dynamic
    if option == "auto" and not on_cuda:
        return dynamic
    return static if static_fits else dynamic


@pytest.mark.parametrize("option", ENGINES)
def test_the_table_chooses_what_the_chain_of_ifs_chose(option):
    for kv_reuse, cache_given, on_cuda, static_fits in itertools.product((False, True), repeat=4):
        got = choose_engine(option, cache_given and kv_reuse, on_cuda, static_fits)
        assert got is _chosen_before(option, kv_reuse, cache_given, on_cuda, static_fits), \
            (option, kv_reuse, cache_given, on_cuda, static_fits)


def test_the_table_reads_only_the_facts_a_row_asks_for():
    read = []

    def fact(name, value):
        return lambda: read.append(name) or value

    assert choose_engine("vllm", fact("kept", True), fact("cuda", True), fact("fits", True)) is vllm_engine
    assert read == []
    assert choose_engine("dynamic", fact("kept", True), fact("cuda", True), fact("fits", True)) is dynamic
    assert "fits" not in read and "cuda" not in read
    read.clear()
    assert choose_engine("auto", fact("kept", True), fact("cuda", False), fact("fits", True)) is dynamic
    assert "fits" not in read  # auto on a CPU never asks whether the static loop fits


# what a call of the door may read once: the model's facts, and what a transformers release does
FACT_READERS = {"supports_kv_reuse": transformers_compat, "cache_kwarg": transformers_compat,
                "device_of": model_facts, "eos_token_ids": model_facts, "context_limit": model_facts}


def test_one_door_call_reads_each_model_fact_once(toy_workspace, tiny_pair, monkeypatch):
    """A multi-turn rollout (kept caches, prefill, the dynamic loop): each outermost call of
    ``generate``/``generate_within`` asks transformers_compat and model_facts each question
    once, however many layers below use the answer (before the table: kv reuse twice per call,
    the cache keyword and the device in every prefill forward and again in the decode loop)."""
    from playpen.rollouts import rollout
    calls: list[Counter] = []
    depth = [0]

    def door(original):
        def wrapped(*args, **kwargs):
            if depth[0] == 0:
                calls.append(Counter())
            depth[0] += 1
            try:
                return original(*args, **kwargs)
            finally:
                depth[0] -= 1
        return wrapped

    def counting(name, original):
        def wrapped(*args, **kwargs):
            if depth[0]:
                calls[-1][name] += 1
            return original(*args, **kwargs)
        return wrapped

    for name, owner in FACT_READERS.items():
        original = getattr(owner, name)
        for module in [m for key, m in sys.modules.items() if key.startswith("playpen") and m is not None]:
            if getattr(module, name, None) is original:
                monkeypatch.setattr(module, name, counting(name, original))
    for name in ("generate", "generate_within"):
        monkeypatch.setattr(engine, name, door(getattr(engine, name)))
    result = rollout("relay", make_learner(tiny_pair), partners={"Listener": "programmatic"},
                     instances=lambda row: row["experiment"]["name"] == "lenient", records_dir=None, seed=1)
    assert len(calls) >= 2 and result.stats.num_reused_tokens > 0  # several turns, over kept caches
    for counts in calls:
        assert counts["supports_kv_reuse"] == 1 and counts["cache_kwarg"] == 1, counts
        assert max(counts.values()) == 1, counts
