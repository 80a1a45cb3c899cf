"""GRPO against collapse and forgetting: baselines and dropped groups on hand-made groups,
the no-signal notice, partner mixes and game shares following their weights (seeded),
past checkpoints as a frozen second adapter, the KL anchor to --init-adapter, the
referencegame augmentation (target and scores right), and bad input (one line, exit 2,
before any model loads)."""
import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from playpen.cli import cli
from playpen.training.grpo import advantages as adv
from playpen.training.grpo import mixes

REPO_ROOT = Path(__file__).resolve().parents[1]
SP_TRAINER = "grpo"
MP_TRAINER = "grpo-teacher"
TOYGAMES = REPO_ROOT / "tests" / "toygames"
NAN = math.nan
EPS = 1e-4


def sd(values):
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


# ----------------------------------------------------------------------------- baselines

# four groups of 4: A varies, A all equal (dropped), B varies with an unscored row, B one scored row (dropped)
REWARDS = [1.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.5, 0.5, NAN, 1.0, 0.0, 1.0, NAN, NAN, 1.0, NAN]
ROLES = ["A"] * 8 + ["B"] * 8
GAMES = ["g"] * 16


def test_group_baseline_is_the_group_mean_and_equal_groups_are_dropped():
    a = adv.Advantages("group", 4, echo=lambda line: None)
    out = a.compute(REWARDS, ROLES, GAMES)
    s1, s3 = sd([1, 0, 0, 0]), sd([1, 0, 1])
    expected = [0.75 / (s1 + EPS), -0.25 / (s1 + EPS), -0.25 / (s1 + EPS), -0.25 / (s1 + EPS),
                0, 0, 0, 0,
                0, (1 - 2 / 3) / (s3 + EPS), (0 - 2 / 3) / (s3 + EPS), (1 - 2 / 3) / (s3 + EPS),
                0, 0, 0, 0]
    assert out == pytest.approx(expected, abs=1e-12)
    assert [v for v in out[4:8] + out[12:16]] == [0.0] * 8  # exactly zero, not nearly
    assert a.metrics == {"grpo/dropped_groups": 0.5}


def test_running_baseline_per_role_over_steps():
    a = adv.Advantages("running", 4, echo=lambda line: None)
    out = a.compute(REWARDS, ROLES, GAMES)
    # first step of a role: that step's mean over all its scored rows (dropped groups included)
    mean_a, mean_b = (1 + 0.5 * 4) / 8, (1 + 0 + 1 + 1) / 4
    s1, s3 = sd([1, 0, 0, 0]), sd([1, 0, 1])
    assert out[:4] == pytest.approx([(r - mean_a) / (s1 + EPS) for r in (1, 0, 0, 0)], abs=1e-12)
    assert out[9:12] == pytest.approx([(r - mean_b) / (s3 + EPS) for r in (1, 0, 1)], abs=1e-12)
    assert out[8] == 0.0 and out[4:8] == [0.0] * 4
    assert a.running == {("g", "A"): mean_a, ("g", "B"): mean_b}
    # next step: the baseline is last step's; then it moves by momentum 0.9
    second = [1.0, 1.0, 1.0, 0.0] + [0.0, 1.0, 0.0, 0.0]
    out = a.compute(second, ["A"] * 4 + ["B"] * 4, ["g"] * 8)
    s = sd([1, 1, 1, 0])
    assert out[:4] == pytest.approx([(r - mean_a) / (s + EPS) for r in (1, 1, 1, 0)], abs=1e-12)
    assert out[4:] == pytest.approx([(r - mean_b) / (s + EPS) for r in (0, 1, 0, 0)], abs=1e-12)
    assert a.running[("g", "A")] == pytest.approx(0.9 * mean_a + 0.1 * 0.75)
    assert a.metrics["grpo/baseline/A"] == pytest.approx(0.9 * mean_a + 0.1 * 0.75)
    assert a.metrics["grpo/dropped_groups"] == 0.0


def test_chance_baseline_from_the_games_declared_level(tiny_workspace):
    from playpen.rewards import BinaryReward, OutcomeReward
    assert mixes.chance_level("referencegame") == pytest.approx(1 / 3, abs=1e-3)
    assert mixes.chance_level("taboo") == 0.0 and mixes.chance_level("wordle") is None
    roles = {"referencegame": ["Instruction Giver", "Instruction Follower"]}
    # a guesser wins with the chance level (reward of a success at Main Score 100), else loses (0)
    for reward in (OutcomeReward(), BinaryReward()):
        assert adv.chance_rewards(roles, reward, {"referencegame": 0.25}) == {
            ("referencegame", "Instruction Giver"): 0.25, ("referencegame", "Instruction Follower"): 0.25}
    shifted = OutcomeReward(lose=(0.1, 0.4))
    assert adv.chance_rewards(roles, shifted, {"referencegame": 0.5})[("referencegame", "Instruction Giver")] \
        == pytest.approx(0.5 * 1.0 + 0.5 * 0.1)
    a = adv.Advantages("chance", 4, chance={("g", "A"): 1 / 3, ("g", "B"): 0.5}, echo=lambda line: None)
    out = a.compute(REWARDS, ROLES, GAMES)
    s1, s3 = sd([1, 0, 0, 0]), sd([1, 0, 1])
    assert out[:4] == pytest.approx([(r - 1 / 3) / (s1 + EPS) for r in (1, 0, 0, 0)], abs=1e-12)
    assert out[9:12] == pytest.approx([(r - 0.5) / (s3 + EPS) for r in (1, 0, 1)], abs=1e-12)
    assert out[4:9] == [0.0] * 5 and out[12:] == [0.0] * 4
    assert a.metrics == {"grpo/dropped_groups": 0.5, "grpo/baseline/A": 1 / 3, "grpo/baseline/B": 0.5}


def test_a_run_without_signal_says_so_once():
    lines = []
    a = adv.Advantages("group", 2, hint="Start from an SFT adapter.", echo=lines.append)
    silent = [-1.0, -1.0, -1.0, -1.0]
    for _ in range(2):
        assert a.compute(silent, ["A"] * 4, ["g"] * 4) == [0.0] * 4
    a.compute([1.0, 0.0, -1.0, -1.0], ["A"] * 4, ["g"] * 4)  # one group with signal: the count restarts
    assert lines == [] and a.metrics["grpo/dropped_groups"] == 0.5
    for _ in range(5):
        a.compute(silent, ["A"] * 4, ["g"] * 4)
    assert len(lines) == 1, lines
    assert lines[0].startswith("[playpen] no learning signal: in the last 3 steps every scored episode got "
                               "reward -1") and lines[0].endswith("Start from an SFT adapter.")


# ----------------------------------------------------------------------------- weights

@pytest.mark.parametrize("value, expected", [
    ("programmatic:0.5,self:0.3,past:0.2", {"programmatic": 0.5, "self": 0.3, "past": 0.2}),
    ("self", {"self": 1.0}), (" a : 0.25 , b:0.75 ", {"a": 0.25, "b": 0.75}),
])
def test_parse_weights(value, expected):
    assert mixes.parse_weights(value, "partners") == expected


@pytest.mark.parametrize("value, message", [
    ("a:0.5,b:0.4", "option --game-shares: the weights sum to 0.9, not 1 (a:0.5, b:0.4)"),
    ("a:x,b:1", "option --game-shares: 'a:x' is not NAME:WEIGHT"),
    ("a:0,b:1", "option --game-shares: the weight of 'a' is 0; expected a number > 0"),
    ("a:0.5,a:0.5", "option --game-shares: 'a' is named twice"),
    (":1", "option --game-shares: ':1' has no name"),
    ("a,b", "option --game-shares: 'a' is not NAME:WEIGHT"),
])
def test_parse_weights_refuses(value, message):
    from playpen.errors import TrainingSetupError
    with pytest.raises(TrainingSetupError) as info:
        mixes.parse_weights(value, "game-shares")
    assert str(info.value).startswith(message)


def test_partner_mix_follows_its_weights_seeded():
    weights = {"programmatic": 0.5, "self": 0.3, "past": 0.2}
    mix = mixes.PartnerMix(weights, {"programmatic": "programmatic", "self": "learner"}, past=object(), seed=3)
    dealt = mix.assign(0, 1000)
    for n in range(1, 1001):  # after every group, each partner within one group of its share
        for name, w in weights.items():
            assert abs(dealt[:n].count(name) - w * n) < 1 + 1e-9, (n, name)
    # seeded: the same seed deals the same groups, also when asked step by step (--resume)
    again = mixes.PartnerMix(weights, {"programmatic": "programmatic", "self": "learner"}, past=object(), seed=3)
    assert again.assign(40, 8) == dealt[40:48] and again.assign(0, 40) == dealt[:40]
    other = mixes.PartnerMix(weights, {"programmatic": "programmatic", "self": "learner"}, past=object(), seed=4)
    assert other.assign(0, 1000) != dealt
    with pytest.raises(ValueError):
        mixes.PartnerMix({"teacher": 1.0}, {})


def test_game_shares_follow_their_weights():
    # game a: one role (1 group per instance); game b: two roles (an instance's 2 groups stay together)
    per_game = {"a": [[("a", i, "R")] for i in range(5)], "b": [[("b", i, "X"), ("b", i, "Y")] for i in range(3)]}
    slots = mixes.game_dataset_slots(per_game, {"a": 0.7, "b": 0.3}, 1000, seed=0)
    assert len(slots) >= 1000
    for n in range(1, len(slots) + 1):
        assert abs(sum(s[0] == "a" for s in slots[:n]) - 0.7 * n) <= 2, n
    for i, slot in enumerate(slots):  # a b instance's two role groups side by side
        if slot[0] == "b" and slot[2] == "X":
            assert slots[i + 1] == ("b", slot[1], "Y")
    assert {s[1] for s in slots if s[0] == "a"} == set(range(5))  # passes over every instance
    assert mixes.game_dataset_slots(per_game, {"a": 0.7, "b": 0.3}, 50, seed=0) == slots[:len(
        mixes.game_dataset_slots(per_game, {"a": 0.7, "b": 0.3}, 50, seed=0))]


def test_game_shares_dataset_of_a_config(tiny_workspace):
    from playpen.training.grpo import rollout_bridge
    from playpen.training.grpo.assembly import share_dataset
    cls = _config_class(SP_TRAINER)
    cfg = cls(game_shares="referencegame:0.75,taboo:0.25", roles="", max_steps=40, groups_per_step=2)
    assert cfg.game_list == ["referencegame", "taboo"]
    per_instance, _ = rollout_bridge.training_slots(cfg.game_list, [], cfg.train_instances)
    dataset = share_dataset(cfg, per_instance, seed=1)
    games = [rollout_bridge.Slot.from_prompt(p).game for p in dataset["prompt"][:80]]
    assert abs(games.count("referencegame") - 60) <= 2


def _config_class(trainer):
    from playpen.cli.run import trainer_class
    return trainer_class(trainer).config_class


# ----------------------------------------------------------------------------- referencegame augmentation

def test_referencegame_augmentation_moves_the_target_with_its_grid(tiny_workspace):
    from playpen.envs.loading import game_instance_rows, load_benchmark
    from playpen.registry import game_spec
    import random
    spec = game_spec("referencegame", "instances_train")
    benchmark = load_benchmark(spec)
    try:
        rows = game_instance_rows(spec)[:20]
        for row in rows:
            instance = row["game_instance"]
            positions = set()
            for seed in range(12):
                new = benchmark.augment_instance(json.loads(json.dumps(instance)), random.Random(seed))
                assert sorted(new["follower_grids"]) == sorted(instance["follower_grids"])
                assert new["follower_grids"][new["target_position"] - 1] == instance["target_grid"]
                assert {k: v for k, v in new.items() if k not in ("follower_grids", "target_position")} == \
                    {k: v for k, v in instance.items() if k not in ("follower_grids", "target_position")}
                positions.add(new["target_position"])
            assert positions == {1, 2, 3}
    finally:
        benchmark.close()


def test_augmented_referencegame_episodes_score_right(tiny_workspace, tiny_pair, tmp_path):
    """Programmatic giver; a follower that always answers "first" wins exactly when the
    shuffled target is first, and the programmatic follower always wins."""
    from playpen.envs.game import Response
    from playpen.rollouts import InstanceRef, rollout
    from playpen.rollouts.partners import Partner
    from rollout_helpers import make_learner

    class AlwaysFirst(Partner):
        def respond(self, requests):
            return [Response("Answer: first") for _ in requests]

    refs = [InstanceRef("referencegame", "letter_grids", i) for i in range(3)]
    for follower, check in ((AlwaysFirst("first"), "first"), ("programmatic", "all")):
        result = rollout("referencegame", make_learner(tiny_pair), roles=[],
                         partners={"Instruction Giver": "programmatic", "Instruction Follower": follower},
                         instances=refs, instances_file="instances_train", num_repeats=6, seed=5, augment=True,
                         records_dir=tmp_path / check)
        positions = []
        for episode in result.episodes:
            instance = json.loads((episode.path / "instance.json").read_text())
            assert instance["follower_grids"][instance["target_position"] - 1] == instance["target_grid"]
            follower_prompt = next(t.context for t in episode.turns if t.role == "Instruction Follower")
            first_grid = follower_prompt.split("First grid:")[1].split("Second grid:")[0].strip()
            assert first_grid == instance["follower_grids"][0].strip()  # the player saw the shuffled order
            positions.append(instance["target_position"])
            won = instance["target_position"] == 1 if check == "first" else True
            assert episode.outcome == ("success" if won else "failure"), (check, instance["target_position"])
            assert episode.main_score == (100 if won else 0)
        assert set(positions) == {1, 2, 3}
    # without augment the instance's own order stays
    plain = rollout("referencegame", make_learner(tiny_pair), roles=[],
                    partners={"Instruction Giver": "programmatic", "Instruction Follower": "programmatic"},
                    instances=refs[:1], instances_file="instances_train", num_repeats=4, records_dir=None)
    assert len({json.dumps(t.context) for e in plain.episodes for t in e.turns
                if t.role == "Instruction Follower"}) == 1


def test_augment_variants_share_draws_within_a_group(tiny_workspace, tiny_pair):
    """--augment-variants N: repeat r of an instance plays draw r mod N, so the episodes of one
    draw see the same prompt (and --share-prompts can run it once); draws stay per instance."""
    from playpen.rollouts import InstanceRef, rollout
    from rollout_helpers import make_learner

    refs = [InstanceRef("referencegame", "letter_grids", i) for i in range(2)]
    result = rollout("referencegame", make_learner(tiny_pair), roles=[],
                     partners={"Instruction Giver": "programmatic", "Instruction Follower": "programmatic"},
                     instances=refs, instances_file="instances_train", num_repeats=8, seed=3, augment=True,
                     augment_variants=3, records_dir=None)
    by_instance: dict = {}
    for episode in result.episodes:
        prompt = next(t.context for t in episode.turns if t.role == "Instruction Follower")
        by_instance.setdefault(episode.game_id, {}).setdefault(episode.repeat % 3, set()).add(json.dumps(prompt))
    assert len(by_instance) == 2
    for variants in by_instance.values():
        assert sorted(variants) == [0, 1, 2]
        assert all(len(prompts) == 1 for prompts in variants.values())  # one prompt per draw
    # a draw per episode (the default): 8 repeats see more than 3 prompts
    free = rollout("referencegame", make_learner(tiny_pair), roles=[],
                   partners={"Instruction Giver": "programmatic", "Instruction Follower": "programmatic"},
                   instances=refs[:1], instances_file="instances_train", num_repeats=8, seed=3, augment=True,
                   records_dir=None)
    assert len({json.dumps(t.context) for e in free.episodes for t in e.turns
                if t.role == "Instruction Follower"}) > 3


# ----------------------------------------------------------------------------- bad input

def _other_base_adapter(folder: Path) -> Path:
    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 4,
                                                            "base_model_name_or_path": "someone/other-model"}))
    (folder / "adapter_model.safetensors").write_bytes(b"not read: the base model is checked first")
    return folder


@pytest.mark.parametrize("trainer, args, expected", [
    (SP_TRAINER, ["--init-adapter", "OTHER"], "was trained on base model 'someone/other-model', not on"),
    (MP_TRAINER, ["-t", "programmatic", "--init-adapter", "OTHER"], "was trained on base model"),
    (SP_TRAINER, ["--partners", "programmatic:0.5,tiny-randon:0.5"],
     "--partners: 'tiny-randon' is neither a partner kind (self, past, teacher, programmatic) nor a registered "
     "model"),
    (SP_TRAINER, ["--partners", "teacher:0.5,self:0.5"], "--partners names 'teacher' but no -t/--teacher MODEL"),
    (SP_TRAINER, ["--partners", "self:0.5,past:0.6"], "option --partners: the weights sum to 1.1, not 1"),
    (SP_TRAINER, ["--game-shares", "referencegame:0.7,taboo:0.2"],
     "option --game-shares: the weights sum to 0.9, not 1 (referencegame:0.7, taboo:0.2)"),
    (SP_TRAINER, ["--game-shares", "referencegame:0.7,tabu:0.3"], "tabu"),
    (SP_TRAINER, ["--games", "wordle", "--game-shares", "referencegame:0.7,taboo:0.3"],
     "--games wordle and --game-shares referencegame,taboo name different games"),
    (SP_TRAINER, ["--baseline", "median"], "option --baseline: 'median' is not valid; expected one of group, "
                                           "running, chance"),
    (SP_TRAINER, ["--baseline", "chance", "--games", "wordle"], "--baseline chance: wordle declares no chance "
                                                                "level"),
    (SP_TRAINER, ["--past-every", "0"], "option --past-every: 0 is not valid"),
    (MP_TRAINER, ["-t", "programmatic", "--augment-variants", "-1"], "option --augment-variants: must be >= 0"),
])
def test_bad_options_are_one_line_before_any_model_loads(tiny_workspace, monkeypatch, tmp_path, trainer, args,
                                                         expected):
    from playpen import models
    monkeypatch.setattr(models, "load_model_by_name", lambda *a, **k: pytest.fail("a model was loaded"))
    other = str(_other_base_adapter(tmp_path / "other-adapter"))
    args = [other if a == "OTHER" else a for a in args]
    result = CliRunner().invoke(cli, ["run", str(trainer), "-l", "tiny-random", *args])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("playpen: error:") and expected in errors[0], result.output
    assert not (tiny_workspace / "models").exists() and not (tiny_workspace / "playpen-records").exists()


def test_unknown_game_share_names_close_matches(tiny_workspace):
    result = CliRunner().invoke(cli, ["run", str(SP_TRAINER), "-l", "tiny-random", "--game-shares",
                                      "referencegame:0.5,tabo:0.5"])
    assert result.exit_code == 2 and "taboo" in result.output and "tabo" in result.output, result.output


def test_help_lists_the_options(tiny_workspace):
    result = CliRunner().invoke(cli, ["run", str(SP_TRAINER), "--help"])
    assert result.exit_code == 0
    for option in ("--baseline", "--partners", "--past-every", "--game-shares", "--augment"):
        assert option in result.output, option


# ----------------------------------------------------------------------------- past checkpoints

def test_past_checkpoints_are_a_frozen_second_adapter(tiny_model_dir):
    """The past partner plays a snapshot of the trained adapter (here: the fresh one of
    step 0, i.e. the base model), the learner keeps training its own; no second model."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from playpen.inference import engine
    from playpen.rollouts import SamplingConfig
    from playpen.rollouts.chat import prompt_ids
    from playpen.rollouts.partners import TurnRequest
    from playpen.training.grpo.past import PastPolicies
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir),
                           LoraConfig(r=4, target_modules="all-linear", task_type="CAUSAL_LM"))
    sampling = SamplingConfig(temperature=0.0, max_new_tokens=6)
    past = PastPolicies(tokenizer, "tiny", sampling, every=5, seed=0)
    partner = past.prepare(model, step=0)
    assert set(model.peft_config) == {"default", "past"} and model.active_adapter == "default"
    assert all(not p.requires_grad for n, p in model.named_parameters() if ".past." in n)
    assert all(p.requires_grad for n, p in model.named_parameters() if ".default." in n)
    # training moves the learner's adapter away from the snapshot
    with torch.no_grad():
        for name, param in model.named_parameters():
            if ".default." in name:
                param.add_(torch.randn_like(param) * 0.5)
    messages = [{"role": "user", "content": "Name a colour."}]
    prompt = prompt_ids(tokenizer, messages)

    def greedy():
        return engine.generate(model, tokenizer, [prompt], sampling)[0].text
    learner_text = greedy()
    with model.disable_adapter():
        base_text = greedy()
    assert learner_text != base_text
    answer = partner.respond([TurnRequest(None, messages[-1], tuple(messages))])[0]
    assert answer.text == base_text  # the step-0 snapshot: a fresh adapter is the base model
    assert model.active_adapter == "default" and greedy() == learner_text
    assert all(not p.requires_grad for n, p in model.named_parameters() if ".past." in n)
    assert all(p.requires_grad for n, p in model.named_parameters() if ".default." in n)
    # snapshots every 5 steps, the last 4 kept
    for step in range(1, 31):
        past.prepare(model, step)
    assert [s for s, _ in past.pool] == [15, 20, 25, 30]



# ----------------------------------------------------------------------------- runs of the trainers

from test_grpo import load_trainer, toy_workspace  # noqa: E402,F401  (the toy games with tiny-yesno)


@pytest.fixture
def kept_trainers(monkeypatch):
    """The real TRL trainers the example trainers build (as they get the run's baseline), kept for inspection."""
    from playpen.training.trl_trainers import PlaypenGRPOTrainer
    built = []
    original = PlaypenGRPOTrainer.__init__

    def keep(trainer, *args, **kwargs):
        original(trainer, *args, **kwargs)
        built.append(trainer)
    monkeypatch.setattr(PlaypenGRPOTrainer, "__init__", keep)
    return built


def test_kl_anchor_is_the_init_adapter(toy_workspace, yesno_model_dir, tmp_path, kept_trainers):
    """--init-adapter with --beta > 0: the KL term's reference is a frozen copy of the
    init adapter (a second adapter on the same base model, no second model), not the bare
    base model; the trained adapter moves away from it; --baseline running is logged."""
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM
    init = tmp_path / "sft-adapter"
    torch.manual_seed(0)
    sft = get_peft_model(AutoModelForCausalLM.from_pretrained(yesno_model_dir),
                         LoraConfig(r=4, target_modules="all-linear", task_type="CAUSAL_LM", init_lora_weights=False))
    sft.save_pretrained(init)
    trainer, learner = load_trainer(SP_TRAINER, "tiny-yesno", games="sayword", train_instances="instances",
                                    max_steps=3, num_generations=8, groups_per_step=1, learning_rate=2e-2,
                                    beta=0.1, reward="binary", save_steps=100, evaluate=False,
                                    init_adapter=str(init), baseline="running")
    trainer.learn(None)
    trl_trainer = kept_trainers[0]
    assert trl_trainer.ref_model is None  # no second model copy
    model = trl_trainer.model
    assert set(model.peft_config) == {"default", "ref"}
    saved = {k.replace("base_model.model.", ""): v for k, v in load_file(init / "adapter_model.safetensors").items()}
    params = dict(model.named_parameters())
    ref = {n.replace("base_model.model.", "").replace(".ref.", "."): p for n, p in params.items() if ".ref." in n}
    trained = {n.replace("base_model.model.", "").replace(".default.", "."): p for n, p in params.items()
               if ".default." in n}
    assert set(ref) == set(saved) == set(trained)
    assert all(torch.equal(ref[k].detach().cpu(), saved[k]) for k in saved)  # frozen: still the init adapter
    assert all(not p.requires_grad for n, p in params.items() if ".ref." in n)
    assert any(not torch.equal(trained[k].detach().cpu(), saved[k]) for k in saved)  # the policy moved
    # the reference differs from the bare base model: the anchor is the supervised policy
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    with torch.no_grad():
        from trl.trainer.utils import use_adapter
        with use_adapter(model, "ref"):
            ref_logits = model(input_ids=ids).logits
        with model.disable_adapter():
            base_logits = model(input_ids=ids).logits
        fresh = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(yesno_model_dir), str(init))
        sft_logits = fresh(input_ids=ids).logits
    assert torch.allclose(ref_logits, sft_logits, atol=1e-5) and not torch.allclose(ref_logits, base_logits)
    run_dir = toy_workspace / "models" / "grpo+lora" / "tiny-yesno" / "selfplay"
    steps = [json.loads(l) for l in (run_dir / "playpen-log.jsonl").read_text().splitlines()]
    steps = [s for s in steps if s["event"] == "train_step"]
    assert len(steps) == 3 and all("grpo/dropped_groups" in s and "train/kl" in s for s in steps)
    assert "grpo/baseline/WordSayer" in steps[-1] and steps[-1]["partners/self"] == 1.0
    assert steps[0]["train/kl"] == pytest.approx(0.0, abs=1e-6) and steps[-1]["train/kl"] > 0


def test_partner_mix_in_a_run(toy_workspace, kept_trainers):
    """--partners programmatic:0.5,past:0.25,self:0.25 on relay: each step's groups are dealt
    to the partners by weight, and the records name who played."""
    result = CliRunner().invoke(cli, [
        "run", str(SP_TRAINER), "-l", "tiny-random", "-T", "1.0", "-L", "3", "--games", "relay",
        "--train-instances", "instances", "--max-steps", "1", "--num-generations", "2", "--groups-per-step", "4",
        "--no-evaluate", "--partners", "programmatic:0.5,past:0.25,self:0.25", "--baseline", "running"])
    assert result.exit_code == 0, result.output
    run_dir = toy_workspace / "models" / "grpo+lora" / "tiny-random" / "selfplay"
    steps = [json.loads(l) for l in (run_dir / "playpen-log.jsonl").read_text().splitlines()]
    steps = [s for s in steps if s["event"] == "train_step"]
    assert [(s["partners/programmatic"], s["partners/past"], s["partners/self"]) for s in steps] == \
        [(0.5, 0.25, 0.25)]
    assert all("grpo/dropped_groups" in s for s in steps)
    records = toy_workspace / "playpen-records" / "grpo+lora" / "tiny-random" / "selfplay"
    partners = []
    for path in records.rglob("interactions.json"):
        players = json.loads(path.read_text())["players"]
        names = sorted(p["model_name"] for k, p in players.items() if k != "GM")
        partners.append(tuple(names))
    assert ("programmatic", "tiny-random") in partners
    assert ("tiny-random", "tiny-random-past") in partners
    assert ("tiny-random", "tiny-random") in partners
    model = kept_trainers[0].model
    assert "past" in model.peft_config
    assert all(not p.requires_grad for n, p in model.named_parameters() if ".past." in n)


def test_micro_batch_size_zero_is_one_on_a_cpu_and_sixteen_on_a_gpu(monkeypatch):
    import torch
    from playpen.training.grpo.steps import step_args
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert step_args(32, 0, False)["per_device_train_batch_size"] == 1
    assert step_args(32, 0, False)["gradient_accumulation_steps"] == 32
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert step_args(32, 0, False)["per_device_train_batch_size"] == 16
    assert step_args(12, 0, False)["per_device_train_batch_size"] == 12  # the largest divisor of the rows <= 16
    assert step_args(32, 4, False)["per_device_train_batch_size"] == 4  # an explicit size wins
