"""Population trainers: matchmaking follows its weights, the league's entry rules, an epoch
trains only its entrants, the default play() on a clemcore game, ratings and run files."""
import json
from collections import Counter
from types import SimpleNamespace

import pytest
import torch

from rollout_helpers import TRIMMING

from playpen.errors import PlaypenError
from playpen.population import FictitiousSelfPlay, FSPOptions, League, LeagueOptions, deal, opponent_weights
from playpen.population.leagues import seated


def tiny_learner(model_dir, temperature=1.0, max_tokens=4):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    return SimpleNamespace(model=model, tokenizer=AutoTokenizer.from_pretrained(model_dir), name="tiny-random",
                           gen_args={"temperature": temperature, "max_tokens": max_tokens})


def docs_example(heading: str) -> dict:
    """The names a python block of docs/populations.md defines (the section under ``### heading``)."""
    import re
    from pathlib import Path
    doc = (Path(__file__).resolve().parents[1] / "docs" / "populations.md").read_text(encoding="utf-8")
    section = doc.split(f"\n### {heading}\n", 1)[1].split("\n#", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    namespace: dict = {}
    exec(compile(block, "docs/populations.md", "exec"), namespace)
    return namespace


# the docs' toy game without clemcore: both players answer one prompt, the higher first token wins
NumberDuel = docs_example("A game without clemcore")["NumberDuel"]


def test_deal_follows_its_weights_and_its_seed():
    names = deal({"x": 0.5, "y": 0.25, "z": 0.25}, 8, seed=3)
    assert Counter(names) == {"x": 4, "y": 2, "z": 2}
    assert names == deal({"x": 0.5, "y": 0.25, "z": 0.25}, 8, seed=3)
    for n in range(1, 9):  # every prefix within one draw of its share
        counts = Counter(names[:n])
        assert all(abs(counts[k] - w * n) < 1 for k, w in {"x": 0.5, "y": 0.25, "z": 0.25}.items())
    assert deal({"x": 1.0, "never": 0.0}, 3) == ["x"] * 3


def test_opponent_weights_prioritise_who_beats_the_learner():
    rates = {"weak": 0.9, "even": 0.5, "strong": 0.1}
    hard = opponent_weights(rates, "hard")
    assert hard["strong"] > hard["even"] > hard["weak"] and abs(sum(hard.values()) - 1) < 1e-9
    assert hard["strong"] == pytest.approx(0.81 / (0.81 + 0.25 + 0.01))
    even = opponent_weights(rates, "even")
    assert even["even"] > even["weak"] == pytest.approx(even["strong"])
    assert list(opponent_weights(rates).values()) == pytest.approx([1 / 3] * 3)
    with pytest.raises(PlaypenError, match="not one of uniform, hard, even"):
        opponent_weights(rates, "greedy")
    assert seated("me", ["a", "b", "c"]) == [("me", "a"), ("b", "me"), ("me", "c")]


def test_the_league_entry_rules():
    league = League(SimpleNamespace(name="x"), config=LeagueOptions(), progress=False)
    assert [(e.name, e.copy_of, e.info["role"]) for e in league.entry(0)] == [("main-0", None, "main")]
    assert [(e.name, e.copy_of) for e in league.entry(1)] == [("main-1", "main-0"), ("mx-1", None)]
    assert [(e.name, e.copy_of) for e in league.entry(2)] == [("main-2", "main-1"), ("mx-2", None), ("lx-2", None)]
    kept = League(SimpleNamespace(name="x"), config=LeagueOptions(reset_exploiters=False), progress=False)
    assert [(e.name, e.copy_of) for e in kept.entry(3)] == [("main-3", "main-2"), ("mx-3", "mx-2"),
                                                              ("lx-3", "lx-2")]
    with pytest.raises(PlaypenError, match="--main-weights"):
        LeagueOptions(main_weights="self:0.5,rivals:0.5")
    with pytest.raises(PlaypenError, match="--opponents"):
        FSPOptions(opponents="greedy")


def test_the_docs_curriculum_pairs_the_newest_with_every_past_player_of_the_other_kind():
    trainer = docs_example("A curriculum of your own: entry() and match()")["GeneratorDiscriminator"](
        SimpleNamespace(name="x"), progress=False)
    assert [e.name for e in trainer.entry(2)] == ["gen-2", "disc-2"]
    assert trainer.match(2, ["gen-2", "disc-2"]) == [("gen-2", "disc-0"), ("gen-2", "disc-1"), ("gen-2", "disc-2"),
                                                     ("gen-0", "disc-2"), ("gen-1", "disc-2")]


def test_an_epoch_trains_only_its_entrants(tiny_model_dir, tmp_path):
    cfg = LeagueOptions(epochs=2, matches_per_epoch=2, lora_r=4, lora_dropout=0.0, learning_rate=5e-3,
                        models_dir=str(tmp_path / "models"))
    trainer = NumberDuel(tiny_learner(tiny_model_dir), config=cfg, seed=1, progress=False)
    trainer.learn()
    pop, run = trainer.population, trainer.run_dir
    assert pop.names() == ["main-0", "main-1", "mx-1"]
    saved = json.loads((run / "population" / "population.json").read_text())
    assert [p["info"] for p in saved["players"]] == [{"role": "main", "epoch": 0}, {"role": "main", "epoch": 1},
                                                     {"role": "main_exploiter", "epoch": 1}]
    from safetensors.torch import load_file

    def on_disk(name):
        return load_file(run / "population" / "adapters" / name / "adapter_model.safetensors")
    # main-0 was saved when epoch 0 ended; epoch 1 left it as it was
    main0 = pop.adapter_weights("main-0")
    assert all(torch.equal(main0[k], v) for k, v in on_disk("main-0").items())
    # main-1 started as a copy of main-0 and trained; mx-1 started fresh (B = 0) and trained
    main1 = pop.adapter_weights("main-1")
    assert any(not torch.equal(main0[k.replace("main-1", "main-0")], v) for k, v in main1.items())
    assert any(v.abs().sum() > 0 for k, v in pop.adapter_weights("mx-1").items() if "lora_B" in k)
    # every match updated the ratings; one snapshot per epoch, a plot, logs
    history = json.loads((run / "ratings.json").read_text())
    assert [s["epoch"] for s in history["snapshots"]] == [0, 1]
    assert history["snapshots"][0]["elo"] == {}  # epoch 0: main-0 against itself, unrated
    assert {"main-1", "mx-1"} <= set(history["snapshots"][1]["elo"]) <= {"main-0", "main-1", "mx-1"}
    assert (run / "ratings.png").stat().st_size > 0
    lines = (run / "matches.jsonl").read_text().splitlines()
    assert len(lines) == len(trainer.results) and all(len(json.loads(x)["rewards"]) == 2 for x in lines)
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert metrics[1]["main-1/train/steps"] >= 1 and metrics[1]["mx-1/train/steps"] >= 1
    # one checkpoint per epoch; a second run into the same folder is refused, one line
    assert [p.name for p in sorted(run.glob("checkpoint-*"))] == ["checkpoint-1", "checkpoint-2"]
    with pytest.raises(PlaypenError, match="already holds checkpoints: pass --resume"):
        NumberDuel(tiny_learner(tiny_model_dir), config=cfg, seed=1, progress=False).learn()


def test_fictitious_self_play_on_a_clemcore_game(tiny_model_dir, toy_workspace, capsys, monkeypatch):
    from playpen.rollouts import chat
    monkeypatch.setattr(chat, "_CHECKED", set())
    cfg = FSPOptions(games="relay", train_instances="instances", epochs=2, matches_per_epoch=2, num_generations=2,
                     lora_r=4, lora_dropout=0.0, models_dir=str(toy_workspace / "models"))
    learner = tiny_learner(tiny_model_dir, max_tokens=6)
    learner.tokenizer.chat_template = TRIMMING  # trims the replies the players started with a space
    trainer = FictitiousSelfPlay(learner, config=cfg, progress=False)
    trainer.learn()
    # the population's members play through the rollout loop: its template is named once
    lines = [line for line in capsys.readouterr().out.splitlines() if "prefix-continuous" in line]
    assert len(lines) == 1 and " on relay (Speaker): after " in lines[0], lines
    run = trainer.run_dir
    assert run == toy_workspace / "models" / "fsp+lora" / "tiny-random"
    assert trainer.population.names() == ["learner-0", "learner-1"]
    # epoch 0: the learner plays itself; epoch 1: learner-1 against learner-0, both seatings
    seatings = [r.players for r in trainer.results]
    assert set(seatings[:4]) == {("learner-0", "learner-0")}
    assert set(seatings[4:]) == {("learner-1", "learner-0"), ("learner-0", "learner-1")}
    records = list((run / "records").glob("epoch-1/*/*/relay/*/instance_*/interactions.json"))
    assert len(records) == 4
    assert {"learner-1--learner-0", "learner-0--learner-1"} == \
        {p.parent.parent.parent.parent.name for p in records}
    history = json.loads((run / "ratings.json").read_text())
    assert set(history["snapshots"][-1]["elo"]) == {"learner-0", "learner-1"}


def run_playpen(args):
    """`playpen ARGS` in this process (the working folder is the test's)."""
    from click.testing import CliRunner
    from playpen.cli import cli
    return CliRunner().invoke(cli, args)


def test_the_league_example_runs_with_playpen_run(toy_workspace):
    import pathlib
    example = pathlib.Path(__file__).parent.parent / "examples" / "trl" / "league_trainer_lora.py"
    args = ["run", str(example), "-l", "tiny-random", "-T", "1.0", "-L", "4", "--games", "relay",
            "--train-instances", "instances", "--epochs", "2", "--matches-per-epoch", "1", "--num-generations", "2",
            "--lora-r", "4"]
    done = run_playpen(args)
    assert done.exit_code == 0, done.output[-2000:]
    run = toy_workspace / "models" / "league+lora" / "tiny-random"
    players = json.loads((run / "population" / "population.json").read_text())["players"]
    assert [p["name"] for p in players] == ["main-0", "main-1", "mx-1"]
    assert all((run / "population" / "adapters" / p["name"] / "adapter_config.json").is_file() for p in players)
    assert (run / "ratings.png").is_file() and "epoch 1: 3 players" in done.stdout
    # a one-player game: one line, exit 2, before any model loads
    solo = run_playpen([*args[:9], "sayword", *args[10:], "--models-dir", "other"])
    assert solo.exit_code == 2 and "game 'sayword' has 1 player slot" in solo.stderr
    assert len(solo.stderr.strip().splitlines()) == 1
    assert not (toy_workspace / "other").exists()


def test_a_competitive_game_is_rewarded_per_role_a_cooperative_one_per_outcome():
    from playpen.outcomes import EpisodeOutcome
    from playpen.population.matches import MatchReward
    reward = MatchReward()

    def adv(outcome, **scores):  # adversarial_taboo's episode scores
        base = {"Attacker Win": 0, "Defender Win": 0, "Tie": 0, "Attacker Aborted": 0, "Defender Aborted": 0}
        return EpisodeOutcome(outcome=outcome, main_score=float("nan"), episode_scores={**base, **scores})
    attacker_won = adv("success", **{"Attacker Win": 1})
    assert (reward(attacker_won, "a", "Attacker"), reward(attacker_won, "b", "Defender")) == (1.0, -1.0)
    defender_won = adv("failure", **{"Defender Win": 1})
    assert (reward(defender_won, "a", "Attacker"), reward(defender_won, "b", "Defender")) == (-1.0, 1.0)
    tie = adv("failure", Tie=1)
    assert reward(tie, "a", "Attacker") == reward(tie, "b", "Defender") == 0.0
    nan = float("nan")  # the format broken by the Attacker: a loss for it, a tie for the Defender
    broken = adv("aborted", **{"Attacker Win": nan, "Defender Win": nan, "Tie": nan, "Attacker Aborted": 1})
    assert (reward(broken, "a", "Attacker"), reward(broken, "b", "Defender")) == (-1.0, 0.0)
    # a cooperative game (no "<Role> Win" scores): playpen's outcome reward, the same for both seats
    won = EpisodeOutcome(outcome="success", main_score=100.0, episode_scores={"Main Score": 100})
    assert reward(won, "a", "Giver") == reward(won, "b", "Follower") == 1.0


def test_a_tournament_of_adversarial_taboo_has_winners(tmp_path, monkeypatch):
    """Both seats used to get the game's one reward: every match a draw. Programmatic
    players (no model) on 3 held-out instances, both seatings."""
    from playpen.population.tournament import run_tournament
    monkeypatch.chdir(tmp_path)
    result = run_tournament(["programmatic", "mock"], "adversarial_taboo", out_dir=tmp_path / "cup",
                            num_instances=3, num_samples=20, echo=lambda line: None)
    lines = [json.loads(x) for x in (tmp_path / "cup" / "matches.jsonl").read_text().splitlines()]
    assert len(lines) == 6
    assert all(sorted(x["rewards"]) in ([-1.0, 1.0], [0.0, 0.0], [-1.0, 0.0]) for x in lines)
    assert any(m.score_a != 0.5 for m in result.matches)
    assert all(x["score"] == (1.0 if x["rewards"][0] > x["rewards"][1] else 0.0 if x["rewards"][0] <
                              x["rewards"][1] else 0.5) for x in lines)


class StopAt:
    """A callback that stops a population run after ``n`` epochs."""

    def __init__(self, n):
        self.n, self.steps = n, []

    def on_learn_start(self, name, total):
        self.total = total

    def on_train_step(self, step, metrics):
        self.steps.append(step)
        return step < self.n

    def on_learn_end(self):
        self.ended = True

    def __getattr__(self, name):  # the rollout's hooks
        return lambda *a, **k: None


def test_a_callback_or_the_time_budget_stops_a_run_between_epochs(tiny_model_dir, tmp_path):
    cfg = LeagueOptions(epochs=5, matches_per_epoch=1, lora_r=4, lora_dropout=0.0, models_dir=str(tmp_path / "a"))
    stop = StopAt(2)
    trainer = NumberDuel(tiny_learner(tiny_model_dir), config=cfg, seed=1, progress=False, callbacks=[stop])
    trainer.learn()
    assert stop.steps == [1, 2] and stop.total == 5 and stop.ended
    assert trainer.population.names() == ["main-0", "main-1", "mx-1"]
    metrics = [json.loads(x) for x in (trainer.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["epoch"] for m in metrics] == [0, 1] and metrics[1]["seconds"] >= metrics[0]["seconds"] > 0
    # a budget smaller than one epoch: the first epoch runs, no second one starts
    quick = LeagueOptions(epochs=5, matches_per_epoch=1, lora_r=4, lora_dropout=0.0, models_dir=str(tmp_path / "b"),
                          time_budget=1e-6)
    trainer = NumberDuel(tiny_learner(tiny_model_dir), config=quick, seed=1, progress=False)
    trainer.learn()
    assert trainer.population.names() == ["main-0"]
    with pytest.raises(PlaypenError, match="--time-budget"):
        LeagueOptions(time_budget=-1)


def test_a_resumed_league_goes_on_after_its_last_epoch_with_its_optimizer_states(tiny_model_dir, tmp_path):
    """Each entrant once got a fresh AdamW; now a copy of the previous epoch's player continues
    its optimizer state, and --resume goes on with the saved states and the same ratings."""
    cfg = dict(epochs=3, matches_per_epoch=2, lora_r=4, lora_dropout=0.0, learning_rate=5e-3,
               models_dir=str(tmp_path / "models"))
    first = NumberDuel(tiny_learner(tiny_model_dir), config=LeagueOptions(**cfg), seed=1, progress=False,
                       callbacks=[StopAt(2)])
    first.learn()
    run = first.run_dir
    assert [p.name for p in sorted(run.glob("checkpoint-*"))] == ["checkpoint-1", "checkpoint-2"]
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]

    def adam_steps(checkpoint, player):
        state = torch.load(run / checkpoint / "optimizers" / f"{player}.pt")["optimizer"]["state"]
        return {int(v["step"]) for v in state.values()}
    main_steps = int(metrics[0]["main-0/train/steps"] + metrics[1]["main-1/train/steps"])
    assert main_steps >= 2 and adam_steps("checkpoint-2", "main-1") == {main_steps}  # main-1 went on from main-0
    assert adam_steps("checkpoint-2", "mx-1") == {int(metrics[1]["mx-1/train/steps"])}  # a fresh player: its own
    weights = {n: first.population.adapter_weights(n) for n in first.population.names()}
    ratings = json.loads((run / "ratings.json").read_text())["snapshots"]

    resumed = NumberDuel(tiny_learner(tiny_model_dir), config=LeagueOptions(**cfg, resume=True), seed=1,
                         progress=False)
    resumed.learn()
    assert resumed.population.names() == ["main-0", "main-1", "mx-1", "main-2", "mx-2", "lx-2"]
    for name, saved in weights.items():  # the frozen players as they were
        assert all(torch.equal(saved[k], v) for k, v in resumed.population.adapter_weights(name).items())
    after = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["epoch"] for m in after] == [0, 1, 2] and after[:2] == metrics
    assert json.loads((run / "ratings.json").read_text())["snapshots"][:2] == ratings  # replayed, the same
    assert adam_steps("checkpoint-3", "main-2") == {main_steps + int(after[2]["main-2/train/steps"])}
