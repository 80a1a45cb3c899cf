"""What went wrong with the real clembench games, each on a toy game of the same shape:
a game registered by name and path only, a learner that speaks only in side calls, an
episode with no learner turn to branch on, a game that never ends with a model player,
programmatic players that use `random`, probe-only episodes in `playpen dataset`."""
import json
import shutil

import pytest
from click.testing import CliRunner
from rollout_helpers import TOYGAMES_DIR

from playpen.cli import cli


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


# ----------------------------------------------------------------------------- name + path entries

@pytest.fixture
def mygame_workspace(tmp_path, monkeypatch):
    """The README's entry form: ``{"game_name": ..., "game_path": ...}``, nothing else."""
    monkeypatch.chdir(tmp_path)
    shutil.copytree(TOYGAMES_DIR / "sayword", tmp_path / "path" / "to" / "sayword")
    (tmp_path / "game_registry.json").write_text(
        json.dumps([{"game_name": "sayword", "game_path": "path/to/sayword"}]))
    return tmp_path


def test_a_name_and_path_entry_takes_its_fields_from_clemgame_json(mygame_workspace):
    from playpen.registry import game_spec, resolve_game
    entry = resolve_game("sayword")
    assert entry.spec["players"] == 1 and entry.spec["roles"] == ["WordSayer"]
    assert entry.spec["description"].startswith("Toy: reply with the given word")
    assert game_spec("sayword").players == 1
    result = invoke("list", "games")
    assert result.exit_code == 0, result.output
    line = next(line for line in result.output.splitlines() if line.strip().startswith("sayword"))
    assert " 1p " in line and "Toy: reply with the given word" in line and "?p" not in line


def test_eval_plays_a_name_and_path_entry(mygame_workspace):
    result = invoke("eval", "-m", "programmatic", "-g", "sayword", "-n", "1")
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output and "No players" not in result.output
    assert list((mygame_workspace / "results").rglob("interactions.json"))


def test_an_entry_whose_own_fields_win_and_an_entry_naming_no_spec_of_the_folder(mygame_workspace):
    (mygame_workspace / "game_registry.json").write_text(json.dumps([
        {"game_name": "sayword", "game_path": "path/to/sayword", "description": "mine"}]))
    from playpen.registry import resolve_game
    assert resolve_game("sayword").spec["description"] == "mine"
    (mygame_workspace / "game_registry.json").write_text(json.dumps([
        {"game_name": "other", "game_path": "path/to/sayword"}]))
    result = invoke("list", "games")
    assert result.exit_code == 2
    assert "entry 0 ('other'): path/to/sayword/clemgame.json has no game 'other' (it has: sayword)" \
        in result.output.replace(str(mygame_workspace) + "/", "")


# ----------------------------------------------------------------------------- a learner heard only in side calls

def test_grpo_trains_what_a_side_call_only_learner_said(toy_workspace):
    """oracle's model player answers only inside the master's steps. A GRPO step once
    trained on one masked EOS per row (num_tokens 2, no reward) and said nothing."""
    from playpen.models import load_model_by_name
    from playpen.rollouts import SamplingConfig
    from playpen.training.grpo import rollout_bridge
    learner = load_model_by_name("tiny-random", gen_args=dict(temperature=1.0, max_tokens=4), role="learner")
    per_instance, roles = rollout_bridge.training_slots(["oracle"], instances="instances")
    assert roles == {"oracle": ["Oracle"]}
    group = 2
    prompts = [s.to_prompt() for s in per_instance[0] for _ in range(group)]
    func = rollout_bridge.GameRollout("tiny-random", learner.tokenizer, num_generations=group, game_roles=roles,
                            sampling=SamplingConfig(temperature=1.0, max_new_tokens=4), records_dir=None,
                            instances="instances")

    class FakeTrainer:
        model = learner.model
        state = type("S", (), {"global_step": 0})()

    out = func(prompts, FakeTrainer())
    assert len(out["completion_ids"]) == group
    for ids, mask, reward in zip(out["completion_ids"], out["env_mask"], out["reward"]):
        assert sum(mask) >= 1 and len(ids) == len(mask)
        assert reward == reward  # a real reward, not the NaN of a row with nothing to learn


def test_a_grpo_step_with_no_trainable_turn_stops_with_one_line(toy_workspace):
    """relay's Listener never speaks when the Speaker's partner breaks the format at once."""
    from playpen.errors import GRPOSetupError
    from playpen.models import load_model_by_name
    from playpen.rollouts import SamplingConfig
    from playpen.rollouts.partners import Partner, TurnResponse
    from playpen.training.grpo import rollout_bridge

    class Mumbler(Partner):
        def respond(self, requests):
            return [TurnResponse("hmm") for _ in requests]

    learner = load_model_by_name("tiny-random", gen_args=dict(temperature=1.0, max_tokens=4), role="learner")
    per_instance, roles = rollout_bridge.training_slots(["relay"], roles=["Listener"], instances="instances")
    prompts = [s.to_prompt() for s in per_instance[0] for _ in range(2)]
    func = rollout_bridge.GameRollout("tiny-random", learner.tokenizer, num_generations=2, game_roles=roles,
                            teacher=Mumbler("mumbler"), sampling=SamplingConfig(temperature=1.0, max_new_tokens=4),
                            records_dir=None, instances="instances")

    class FakeTrainer:
        model = learner.model
        state = type("S", (), {"global_step": 0})()

    with pytest.raises(GRPOSetupError, match="GRPO step 1: the trained role.s. Listener of relay produced no "
                                             "trainable turns in 2 episode.s. .outcomes: aborted."):
        func(prompts, FakeTrainer())


# ----------------------------------------------------------------------------- branching with no learner turn

def test_branching_says_how_many_branch_points_it_found(toy_workspace, tiny_pair, capsys):
    """An episode that ends before any learner turn once came back alone, unexplained."""
    from rollout_helpers import make_learner

    from playpen.rollouts import Branching, InstanceRef, rollout
    from playpen.rollouts.partners import Partner, TurnResponse

    class Mumbler(Partner):
        def respond(self, requests):
            return [TurnResponse("hmm") for _ in requests]

    learner = make_learner(tiny_pair)
    result = rollout("relay", learner, partners={"Speaker": Mumbler("mumbler")}, branching=Branching(factor=3),
                     instances=[InstanceRef("relay", "short", 0)], records_dir=None, instances_file="instances")
    assert len(result.episodes) == 1 and result.episodes[0].outcome == "aborted"
    assert result.stats.num_branch_points == 0 and result.stats.as_metrics()["rollout/branch_points"] == 0
    assert "branching: 0 branch point(s) found in 1 episode(s)" in capsys.readouterr().err
    result = rollout("sayword", learner, branching=Branching(factor=3), records_dir=None,
                     instances=[InstanceRef("sayword", "words", 0)])
    assert len(result.episodes) == 3 and result.stats.num_branch_points == 1
    assert "branch point" not in capsys.readouterr().err


# ----------------------------------------------------------------------------- a game that never ends with a model

def test_the_turn_limit_ends_an_endless_episode_as_aborted(toy_workspace, tiny_pair, capsys):
    """stubborn asks again after every wrong format: a random model never ends it."""
    from rollout_helpers import make_learner

    from playpen.rollouts import InstanceRef, rollout
    result = rollout("stubborn", make_learner(tiny_pair), instances=[InstanceRef("stubborn", "pick", 0)],
                     max_turns=4, seed=0)
    (episode,) = result.episodes
    assert episode.outcome == "aborted" and episode.num_turns <= 4
    assert "[playpen] stubborn: episode pick 0 the episode did not end within 4 turns" in capsys.readouterr().err
    interactions = json.loads((episode.path / "interactions.json").read_text())
    notes = [e["action"]["content"] for turn in interactions["turns"] for e in turn
             if e["action"]["type"] == "turn limit"]
    assert notes == ["playpen: the episode did not end within 4 turns (the turn limit, --max-turns): "
                     "ended as aborted"]
    assert interactions["Aborted"] == 1 and interactions["Success"] == 0
    assert sum(e["action"]["type"] == "get message" for turn in interactions["turns"] for e in turn) == 4


def test_eval_ends_an_endless_episode_at_max_turns(toy_workspace, monkeypatch):
    from playpen.envs import turns
    monkeypatch.setattr(turns, "_said", set())  # said once per game and process
    result = invoke("eval", "-m", "tiny-random", "-g", "stubborn", "-n", "1", "-L", "3", "--max-turns", "3")
    assert result.exit_code == 0, result.output
    assert "[playpen] stubborn: episode pick 0 the episode did not end within 3 turns" in result.output
    (interactions,) = (toy_workspace / "results").rglob("interactions.json")
    data = json.loads(interactions.read_text())
    assert data["Aborted"] == 1
    assert json.loads((interactions.parent / "scores.json").read_text())["episode scores"]["Aborted"] == 1
    result = invoke("eval", "-m", "tiny-random", "-g", "stubborn", "--max-turns", "-1")
    assert result.exit_code == 2 and "option --max-turns: -1 is not valid; expected an integer >= 0" in result.output


def test_a_game_that_declares_its_turn_limit_gets_it_by_default(tiny_workspace, monkeypatch):
    """Without --max-turns each game takes the "max_turns" of its clemgame.json (stubborn
    declares 3 here); --max-turns still wins; a game that declares none gets 200 (issue 40:
    200 turns of clean_up held one episode for ~30 minutes on a CPU)."""
    from playpen.envs import turns
    bench = tiny_workspace / "bench"
    shutil.copytree(TOYGAMES_DIR / "stubborn", bench / "stubborn")
    spec = json.loads((bench / "stubborn" / "clemgame.json").read_text())
    (bench / "stubborn" / "clemgame.json").write_text(json.dumps({**spec, "max_turns": 3}))
    (tiny_workspace / "game_registry.json").write_text(json.dumps([{"benchmark_path": str(bench)}]))
    for args, limit in (([], 3), (["--max-turns", "2"], 2)):
        monkeypatch.setattr(turns, "_said", set())  # said once per game and process
        result = invoke("eval", "-m", "tiny-random", "-g", "stubborn", "-n", "1", "-L", "3", "--overwrite", *args)
        assert result.exit_code == 0, result.output
        assert f"[playpen] stubborn: episode pick 0 the episode did not end within {limit} turns" in result.output
    from types import SimpleNamespace
    assert turns.game_turn_limit(SimpleNamespace(game_name="clean_up")) == turns.DEFAULT_MAX_TURNS == 200
    assert turns.game_turn_limit(SimpleNamespace(max_turns="3")) == 200  # not an integer: not a declaration
    assert turns.game_turn_limit(SimpleNamespace(max_turns=3), 0) == 0
    help_text = " ".join(invoke("eval", "--help").output.split())
    assert "the game's own limit" in help_text and "half an hour" in help_text


# ----------------------------------------------------------------------------- playpen dataset on probe-only episodes

def test_dataset_names_side_call_only_players_as_the_reason(toy_workspace):
    """`clem run`'s records of a side-call-only player log no turn of it: the report once said
    the episodes "ended before any player's reply"."""
    assert invoke("eval", "-m", "tiny-random", "-g", "oracle", "-n", "1", "-L", "3").exit_code == 0
    result = invoke("dataset", toy_workspace / "results", "-o", toy_workspace / "out.jsonl")
    assert result.exit_code == 0, result.output
    assert "1 episode(s) gave no record: 1 had players who answered only in side calls (model calls inside " \
           "the game's steps, in player_2.requests.json" in result.output
    assert "ended before any player's reply" not in result.output


# ----------------------------------------------------------------------------- usability

@pytest.fixture
def word_roles_workspace(toy_workspace):
    """relay whose player classes say WordSpeaker/WordListener while clemgame.json says
    Speaker/Listener (clembench's taboo: WordGuesser and Guesser)."""
    folder = toy_workspace / "games" / "wordrelay"
    shutil.copytree(TOYGAMES_DIR / "relay", folder)
    master = folder / "master.py"
    master.write_text(master.read_text().replace('game_role="Speaker"', 'game_role="WordSpeaker"')
                      .replace('game_role="Listener"', 'game_role="WordListener"'))
    spec = json.loads((folder / "clemgame.json").read_text())
    (folder / "clemgame.json").write_text(json.dumps({**spec, "game_name": "wordrelay"}))
    (toy_workspace / "game_registry.json").write_text(json.dumps([{"benchmark_path": str(toy_workspace / "games")}]))
    return toy_workspace


def test_partners_accept_the_clemgame_json_role_and_the_player_class_role(word_roles_workspace, tiny_pair):
    from rollout_helpers import make_learner

    from playpen.errors import RolloutError
    from playpen.rollouts import InstanceRef, rollout
    learner = make_learner(tiny_pair)
    for key in ("Listener", "WordListener"):
        result = rollout("wordrelay", learner, partners={key: "programmatic"}, records_dir=None,
                         instances=[InstanceRef("wordrelay", "short", 0)])
        (episode,) = result.episodes
        assert {t.role for t in episode.trajectories} == {"WordSpeaker"}, key
        assert {t.responder for t in episode.turns if t.player_name == "Player 2"} <= {"programmatic"}
    result = rollout("wordrelay", learner, roles=["Speaker"], partners={"Listener": "programmatic"},
                     records_dir=None, instances=[InstanceRef("wordrelay", "short", 0)])
    assert {t.role for t in result.episodes[0].trajectories} == {"WordSpeaker"}
    with pytest.raises(RolloutError, match="unknown role or player 'Lisener'. Did you mean: Listener"):
        rollout("wordrelay", learner, partners={"Lisener": "programmatic"}, records_dir=None)


def test_playpen_run_max_turns_is_the_limit_of_the_trainers_rollouts(tiny_workspace):
    (tiny_workspace / "t.py").write_text(
        "from playpen import BasePlayPen\n"
        "from playpen.envs.turns import max_turns\n\n"
        "class Probe(BasePlayPen):\n"
        "    def learn(self, game_registry):\n"
        "        open('limit', 'w').write(str(max_turns()))\n")
    result = invoke("run", "t.py", "-l", "tiny-random", "--max-turns", "7")
    assert result.exit_code == 0, result.output
    assert (tiny_workspace / "limit").read_text() == "7"
    from playpen.envs.turns import max_turns
    assert max_turns() is None  # each game's own limit again: the command's limit does not outlive it
    result = invoke("run", "t.py", "-l", "tiny-random", "--max-turns", "-2")
    assert result.exit_code == 2 and "option --max-turns: -2 is not valid" in result.output


def test_the_turn_limit_ends_a_legacy_master_as_aborted(tmp_path, monkeypatch):
    """The legacy master API (probes) logs its own outcome keys: the limit's win."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "game_registry.json").write_text(json.dumps([{"benchmark_path": str(TOYGAMES_DIR)}]))
    from playpen.envs import GameEnv, make_env
    env, rows = make_env("probes")
    env = GameEnv(env.benchmark, env.player_models, max_turns=1)
    try:
        env.reset(rows[0])
        steps = 0
        while not env.done:
            player, context = env.perceive()
            result = env.step(player._custom_response(context))
            steps += 1
    finally:
        env.benchmark.close()
    assert steps == 1 and result.outcome == "aborted" and env.interactions["Aborted"] == 1
    assert result.episode_scores["Aborted"] == 1 and result.episode_scores["Main Score"] != \
        result.episode_scores["Main Score"]  # NaN, as for every aborted episode
    assert [e["action"]["type"] for turn in env.interactions["turns"] for e in turn][-1] == "turn limit"
