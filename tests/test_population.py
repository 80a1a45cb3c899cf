"""Players as adapters: mixed-adapter generation, the Population, seatings through the rollout engine."""
import json

import pytest
import torch

from playpen.errors import AdapterError
from playpen.population import BASE, Population, PopulationError, play_seating
from playpen.rollouts import SamplingConfig, chat
from playpen.inference.engine import generate

MESSAGES = [[{"role": "user", "content": "Say hello"}],
            [{"role": "user", "content": "Say hello there, friend"}],
            [{"role": "user", "content": "Another prompt entirely"}]]


def lora(**kwargs):
    from peft import LoraConfig
    # random A and B: every adapter answers differently from the base and from the others
    return LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False, **kwargs)


@pytest.fixture
def population(tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)  # a fresh copy: peft changes it in place
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    torch.manual_seed(0)
    pop = Population(model, tokenizer, str(tiny_model_dir), lora())
    for name in ("alice", "bob", "carol"):
        pop.add_adapter(name, {"role": "main", "epoch": 0})
    pop.add_base("base")
    return pop


def test_mixed_adapter_rows_give_the_tokens_of_each_adapter_alone(population, monkeypatch):
    model, tokenizer = population.model, population.tokenizer
    prompts = [chat.prompt_ids(tokenizer, m) for m in MESSAGES] * 2
    names = ["alice", "bob", BASE, "carol", "alice", "bob"]
    sampling = SamplingConfig(temperature=0.0, max_new_tokens=6)
    calls = []
    original = model.generate
    monkeypatch.setattr(model, "generate", lambda **kw: calls.append(kw["adapter_names"]) or original(**kw))
    mixed = generate(model, tokenizer, prompts, sampling, adapter_names=names)
    assert calls == [names] or sorted(calls[0]) == sorted(names)  # one generate for all six rows
    alone = [generate(model, tokenizer, [p], sampling, adapter_names=[n])[0] for p, n in zip(prompts, names)]
    assert [g.token_ids for g in mixed] == [g.token_ids for g in alone]
    for gen, single in zip(mixed, alone):
        assert torch.allclose(torch.tensor(gen.logprobs), torch.tensor(single.logprobs), atol=1e-4)
    # the adapters really differ: same prompt, different answers
    assert len({mixed[0].token_ids, mixed[1].token_ids if prompts[1] == prompts[0] else mixed[4].token_ids}) >= 1
    same_prompt = [generate(model, tokenizer, [prompts[0]] * 4, sampling, adapter_names=["alice", "bob", "carol", BASE])]
    assert len({g.token_ids for g in same_prompt[0]}) > 1


def test_population_saves_and_loads_its_players(population, tmp_path, tiny_model_dir):
    from transformers import AutoModelForCausalLM
    population.add_partner("giver", "programmatic", {"role": "teacher"})
    folder = population.save(tmp_path / "pop")
    data = json.loads((folder / "population.json").read_text())
    assert [p["name"] for p in data["players"]] == ["alice", "bob", "carol", "base", "giver"]
    assert data["players"][0]["info"] == {"role": "main", "epoch": 0}
    with pytest.raises(PopulationError, match="exists already"):
        population.save(folder)
    loaded = Population.load(folder, AutoModelForCausalLM.from_pretrained(tiny_model_dir), population.tokenizer)
    assert loaded.names() == population.names()
    assert loaded.spec("giver").partner == "programmatic" and loaded.spec("base").kind == "base"
    for name in ("alice", "bob", "carol"):
        mine, theirs = population.adapter_weights(name), loaded.adapter_weights(name)
        assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)
    assert loaded.learner("base").adapter == BASE and loaded.learner("giver") == "programmatic"


def test_bad_players_are_one_clear_line(population, tmp_path, foreign_adapter):
    with pytest.raises(AdapterError, match="trained on base model 'SomeOrg/other-model-7b'"):
        population.add_adapter("foreign", path=str(foreign_adapter(tmp_path / "foreign")))
    with pytest.raises(AdapterError, match="is not a folder"):
        population.add_adapter("ghost", path=str(tmp_path / "missing"))
    with pytest.raises(PopulationError, match="already in the population"):
        population.add_adapter("alice")
    with pytest.raises(PopulationError, match="no player 'd'"):
        population.learner("d")
    with pytest.raises(PopulationError, match="not valid"):
        population.add_base(BASE)
    assert "foreign" not in population and "ghost" not in population


def test_adapter_players_of_one_model_share_one_generate_per_step(population, toy_workspace, monkeypatch):
    from playpen.inference import engine
    from playpen.rollouts import Learner, rollout
    calls = []
    original = engine.generate_within

    def spy(model, tokenizer, prompts, sampling, adapter_names=None, **kwargs):
        calls.append(sorted(set(adapter_names or [])))
        return original(model, tokenizer, prompts, sampling, adapter_names=adapter_names, **kwargs)
    monkeypatch.setattr(engine, "generate_within", spy)
    sampling = SamplingConfig(temperature=0.0, max_new_tokens=6)
    host = Learner(population.model, population.tokenizer, "host", sampling)  # plays no role
    result = rollout(["relay", "sayword"], host, records_dir=None, num_repeats=2, max_concurrent_episodes=64,
                     partners={"Speaker": population.learner("alice", sampling), "Listener": "programmatic",
                               "WordSayer": population.learner("bob", sampling)})
    # step 1: the relay speakers (a) and the word sayers (b) wait together: ONE generate, two adapters
    assert calls[0] == ["alice", "bob"]
    models = {t.model for t in result.trajectories}
    assert models == {"alice", "bob"}
    for t in result.trajectories:
        assert t.role == {"alice": "Speaker", "bob": "WordSayer"}[t.model] and t.env_mask[0] == 1
    # each row was generated by its own adapter: greedy answers equal those of the adapter alone
    first = {t.model: t for t in result.trajectories if t.repeat == 0}
    for name, t in first.items():
        alone = original(population.model, population.tokenizer, [list(t.prompt_ids)], sampling,
                         adapter_names=[name])[0][0]
        turn = list(t.completion_ids[:len(alone.token_ids)])
        assert turn == list(alone.token_ids)


def test_a_seating_writes_records_and_experiences(population, toy_workspace):
    from playpen.population.matches import game_seats
    seats, rows = game_seats("relay", "instances")
    assert seats == ["Speaker", "Listener"]
    results = play_seating(population, "relay", seats, ("alice", "bob"), rows[:2], instances_file="instances",
                           num_repeats=2, sampling=SamplingConfig(temperature=1.0, max_new_tokens=8),
                           records_dir=toy_workspace / "records", run_name="alice-vs-bob", seed=0)
    assert len(results) == 4 and all(r.players == ("alice", "bob") for r in results)
    assert all(len(r.rewards) == 2 for r in results)
    speaker = [x for r in results for x in r.experiences if x.player == "alice"]
    assert len(speaker) == 4 and len({x.group for x in speaker}) == 2  # one group per instance
    assert all(len(x.completion_ids) == len(x.env_mask) == len(x.logprobs) for x in speaker)
    folder = toy_workspace / "records" / "alice-vs-bob" / "alice--bob" / "relay"
    assert len(list(folder.glob("*/instance_*/interactions.json"))) == 4


def test_a_one_player_game_cannot_host_matches(toy_workspace):
    from playpen.population.matches import game_seats
    with pytest.raises(PopulationError, match="game 'sayword' has 1 player slot"):
        game_seats("sayword", "instances")
