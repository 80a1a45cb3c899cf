"""Third-party game shapes (issue 14): each test plays a purpose-built toy game of one
shape (tests/toygames/, tests/fixtures/) through eval, rollouts, training and datasets."""
import json

import pytest
from click.testing import CliRunner

from rollout_helpers import GenerateSpy, make_learner

from playpen.cli import cli
from playpen.rollouts import rollout


def invoke(*args):
    return CliRunner().invoke(cli, list(args))


# ----------------------------------------------------------------------------- 2. declared > built players

def test_game_building_fewer_players_than_declared_rolls_out(toy_workspace, tiny_pair):
    result = rollout("interview", make_learner(tiny_pair), seed=0)
    assert len(result.episodes) == 2 and all(e.error is None for e in result.episodes)
    for episode in result.episodes:
        assert episode.roles == {"Player 1": "Questioner", "Player 2": "Answerer"}
        assert episode.models["Player 2"] == "tiny-random"
        (trajectory,) = episode.trajectories
        assert trajectory.role == "Answerer"
    # the unused slot never shows up in the records' folder name
    assert [p.name for p in result.run_dir.iterdir()] == ["tiny-random"]


def test_game_building_fewer_players_than_declared_under_grpo_slots(toy_workspace):
    from playpen.envs.loading import game_roles
    names, rows = game_roles("interview", "instances")
    assert names == ["Answerer"] and len(rows) == 2


# ----------------------------------------------------------------------------- 1. own instances file per spec

def test_eval_plays_each_specs_own_instances_file(toy_workspace):
    result = invoke("eval", "-m", "programmatic", "-g", "hints,hints_withclue", "--json")
    assert result.exit_code == 0, result.output
    table = json.loads(result.stdout)
    assert table["instances"] == {"hints": "instances", "hints_withclue": "instances_withclue"}
    run_dir = toy_workspace / "results" / "programmatic"
    assert sorted(p.name for p in (run_dir / "hints").iterdir()) == ["category"]
    assert sorted(p.name for p in (run_dir / "hints_withclue").iterdir()) == ["clue"]
    assert {g["game"]: g["num_episodes"] for g in table["games"]} == {"hints": 2, "hints_withclue": 3}
    recorded = json.loads((run_dir / "playpen-eval.json").read_text())
    assert recorded["instances"] == table["instances"]
    text = invoke("eval", "-m", "programmatic", "-g", "hints_withclue", "--overwrite")
    assert "in/instances_withclue.json" in text.output


def test_eval_instances_option_needs_the_file_in_every_game(toy_workspace):
    result = invoke("eval", "-m", "programmatic", "-g", "hints,relay,countdown", "-i", "instances_train")
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "playpen: error: instances 'instances_train': relay, countdown have no such file in in/; "
        "without -i each game plays its own instances file"]
    assert not (toy_workspace / "results").exists()
    # where every game has it, -i applies to all of them
    result = invoke("eval", "-m", "programmatic", "-g", "hints,sayword", "-i", "instances_train", "--json")
    assert result.exit_code == 0, result.output
    table = json.loads(result.stdout)
    assert table["instances"] == {"hints": "instances_train", "sayword": "instances_train"}


def test_rollout_plays_each_specs_own_instances_file(toy_workspace, tiny_pair):
    result = rollout(["hints", "hints_withclue"], make_learner(tiny_pair), seed=0)
    assert [(e.game, e.experiment) for e in result.episodes] == \
        [("hints", "category")] * 2 + [("hints_withclue", "clue")] * 3
    assert all(e.error is None for e in result.episodes)
    run = json.loads((result.run_dir / "tiny-random" / "run.json").read_text())
    assert {g: info["instances"] for g, info in run["games"].items()} == \
        {"hints": "instances", "hints_withclue": "instances_withclue"}
    # the training split of a spec with its own instances file is <own>_train
    train = rollout(["hints_withclue"], make_learner(tiny_pair), instances_file="instances_train",
                    records_dir=None, seed=0)
    assert [e.game_id for e in train.episodes] == [0]


def test_a_game_without_a_training_split_is_named_in_one_line(toy_workspace):
    from playpen.errors import UnknownGameError
    from playpen.registry import game_spec
    with pytest.raises(UnknownGameError) as info:
        game_spec("interview", "instances_train")
    assert str(info.value) == ("game 'interview' has no in/instances_train.json (instance files: instances): "
                               "the training split, see docs/own-games.md (or --train-instances)")


def test_trainer_trains_on_each_specs_split_and_evaluates_on_its_own_file(toy_workspace):
    from playpen.cli.run import trainer_class
    from playpen.models import load_model_by_name
    cls = trainer_class("sft")
    learner = load_model_by_name("tiny-random", gen_args=dict(temperature=0.0, max_tokens=6), role="learner")
    config = cls.config_class(games="hints,hints_withclue", max_steps=1, batch_size=2, max_length=300,
                              save_steps=1, lora_r=4, eval_sets="none", eval_static=False)
    cls(learner, config=config, progress=False).learn(None)
    demos_dir = toy_workspace / "playpen-records" / "demonstrations"
    demos = {p.parent.parent.name: p.parent.name for p in demos_dir.rglob("experiment.json")}
    assert demos == {"hints": "category", "hints_withclue": "clue"}
    assert len(list(demos_dir.rglob("hints_withclue/clue/instance_*"))) == 1  # its own training split
    summary = json.loads(next((toy_workspace / "models").rglob("playpen-run.json")).read_text())
    assert summary["eval"]["instances"] == {"hints": "instances", "hints_withclue": "instances_withclue"}
    assert {g["game"]: g["num_episodes"] for g in summary["eval"]["games"]} == {"hints": 2, "hints_withclue": 3}


# ----------------------------------------------------------------------------- 4. games that fail to load or set up

@pytest.fixture
def unloadable_workspace(toy_workspace):
    """toy_workspace with the fixture games that fail to load (needsdep) or set up (needsfile)."""
    from conftest import FIXTURES_DIR
    (toy_workspace / "game_registry.json").write_text(json.dumps(
        [{"benchmark_path": str(FIXTURES_DIR / "unloadable_games")},
         {"benchmark_path": str(FIXTURES_DIR.parent / "toygames")}]), encoding="utf-8")
    return toy_workspace


@pytest.mark.parametrize("game, cause", [
    ("needsdep", "could not be loaded from {path}: ModuleNotFoundError: No module named "
                 "'playpen_fixture_missing_dependency'"),
    ("needsfile", "failed in every episode (in/instances.json): FileNotFoundError: [Errno 2] No such file "
                  "or directory: '{path}/resources/words.txt'")])
def test_eval_names_the_real_error_of_a_broken_game_and_leaves_nothing(unloadable_workspace, game, cause):
    from conftest import FIXTURES_DIR
    path = FIXTURES_DIR / "unloadable_games" / game
    details = unloadable_workspace / "playpen-records" / "logs" / f"eval-{game}.error.txt"
    for _ in range(2):  # the second run is not blocked by the first
        result = invoke("eval", "-m", "programmatic", "-g", game)
        assert result.exit_code == 2
        line = f"playpen: error: game '{game}' {cause.format(path=path)} (details: {details})"
        assert result.stderr.strip().splitlines()[-1] == line
        assert "Traceback" not in result.stderr and "exceptions occurred" not in result.stderr
        assert "Traceback" in details.read_text()
        assert not (unloadable_workspace / "results" / "programmatic").exists()


def test_eval_tabulates_the_games_that_play_beside_a_broken_one(unloadable_workspace):
    result = invoke("eval", "-m", "programmatic", "-g", "needsfile,sayword,needsdep")
    assert result.exit_code == 2
    assert "sayword" in result.stdout and "needsfile" not in result.stdout
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("playpen: error: game 'needsfile' failed in every episode")
    assert "; game 'needsdep' failed too (details: " in error
    run_dir = unloadable_workspace / "results" / "programmatic"
    assert sorted(p.name for p in run_dir.iterdir() if p.is_dir()) == ["sayword"]
    assert len(json.loads((run_dir / "playpen-eval.json").read_text())["failed_games"]) == 2


def test_rollout_raises_a_playpen_error_naming_the_game_and_cause(unloadable_workspace, tiny_pair):
    from playpen.errors import GameLoadError
    with pytest.raises(GameLoadError, match=r"game 'needsdep' could not be loaded from .*: ModuleNotFoundError: "
                                            r"No module named 'playpen_fixture_missing_dependency'") as info:
        rollout("needsdep", make_learner(tiny_pair), records_dir=None)
    assert isinstance(info.value.__cause__, ModuleNotFoundError)
    with pytest.raises(GameLoadError, match=r"game 'needsfile' could not be set up \(instance only/0 of "
                                            r"in/instances.json\): FileNotFoundError: .*words.txt") as info:
        rollout("needsfile", make_learner(tiny_pair), records_dir=None)
    assert isinstance(info.value.__cause__, FileNotFoundError)


# ----------------------------------------------------------------------------- 7. results.csv of a run folder

def test_results_csv_counts_every_scored_episode_of_the_run_folder(toy_workspace):
    import csv
    for game in ("hints", "countdown"):  # two single-game calls into the same run folder
        assert invoke("eval", "-m", "programmatic", "-g", game).exit_code == 0
    run_dir = toy_workspace / "results" / "programmatic"
    header, row = list(csv.reader((run_dir / "results.csv").open()))
    values = dict(zip(header, row))
    assert values["hints, Quality Score"] == "100.0" and values["countdown, % Played"] == "100.0"
    recorded = json.loads((run_dir / "playpen-eval.json").read_text())
    assert [g["game"] for g in recorded["games"]] == ["countdown"]  # this call's table
    whole = recorded["run_folder"]
    assert [g["game"] for g in whole["games"]] == ["countdown", "hints"]
    assert whole["instances"] == {"countdown": "instances", "hints": "instances"}
    assert values["-, clemscore"] == str(whole["clemscore"])


# ----------------------------------------------------------------------------- 6. role spellings

@pytest.mark.parametrize("role", ["InstructionGiver", "Instruction Giver", "instruction_giver"])
def test_dataset_role_filter_matches_either_spelling_in_both_layouts(clem_workspace, monkeypatch, role):
    from conftest import FIXTURES_DIR
    monkeypatch.chdir(clem_workspace)
    assert invoke("eval", "-m", "programmatic", "-g", "referencegame", "-n", "1").exit_code == 0
    layouts = {"3.x": (clem_workspace / "results", ["--include-programmatic"]),
               "2.x": (FIXTURES_DIR / "clembench-runs-v2.0", [])}
    for layout, (folder, extra) in layouts.items():
        out = clem_workspace / f"{layout}.jsonl"
        result = invoke("dataset", str(folder), "-o", str(out), "-g", "referencegame", "--role", role, *extra)
        assert result.exit_code == 0, (layout, result.output)
        records = [json.loads(line) for line in out.read_text().splitlines()]
        assert records, layout
        assert {r["meta"]["game"] for r in records} == {"referencegame"}
        assert {r["meta"]["game_role"] for r in records} == {"Instruction Giver"}


# ----------------------------------------------------------------------------- 5. same-name games

@pytest.fixture
def shadow_workspace(toy_workspace):
    """toy_workspace registering the toy games, then another benchmark with its own `sayword`."""
    from conftest import FIXTURES_DIR
    (toy_workspace / "game_registry.json").write_text(json.dumps(
        [{"benchmark_path": str(FIXTURES_DIR.parent / "toygames")},
         {"benchmark_path": str(FIXTURES_DIR / "otherbench")}]), encoding="utf-8")
    return toy_workspace


def _experiments(run_dir, game="sayword"):
    return sorted(p.name for p in (run_dir / game).iterdir())


def test_list_games_shows_every_copy_and_marks_the_shadowed(shadow_workspace):
    result = invoke("list", "games")
    assert result.exit_code == 0
    lines = [line.split() for line in result.output.splitlines() if line.split()[:1] == ["sayword"]]
    assert [line[2] for line in lines] == ["toygames:sayword", "otherbench:sayword"]
    assert result.output.splitlines()[0].endswith("1 shadowed copy: pick one with SOURCE:GAME):")
    shadowed = next(line for line in result.output.splitlines() if "otherbench:sayword" in line)
    assert shadowed.endswith("(shadowed by toygames:sayword)")


def test_eval_picks_a_copy_by_registry_order_qualified_name_or_path(shadow_workspace):
    from conftest import FIXTURES_DIR
    run_dir = shadow_workspace / "results" / "programmatic"
    result = invoke("eval", "-m", "programmatic", "-g", "sayword")
    assert result.exit_code == 0 and _experiments(run_dir) == ["words"]
    assert "playpen: note: 'sayword' is toygames:sayword" in result.stderr
    assert "shadowed: otherbench:sayword" in result.stderr
    for choice in ("otherbench:sayword", str(FIXTURES_DIR / "otherbench" / "sayword")):
        result = invoke("eval", "-m", "programmatic", "-g", choice, "--overwrite")
        assert result.exit_code == 0 and _experiments(run_dir) == ["shout"]
        assert "note" not in result.stderr
        recorded = json.loads((run_dir / "playpen-eval.json").read_text())
        assert recorded["game_paths"] == {"sayword": str(FIXTURES_DIR / "otherbench" / "sayword")}
    # the order in game_registry.json decides what the plain name picks
    registry = shadow_workspace / "game_registry.json"
    registry.write_text(json.dumps(list(reversed(json.loads(registry.read_text())))))
    assert invoke("eval", "-m", "programmatic", "-g", "sayword", "--overwrite").exit_code == 0
    assert _experiments(run_dir) == ["shout"]
    # two copies of one name in one call would share a records folder
    result = invoke("eval", "-m", "programmatic", "-g", "sayword,toygames:sayword", "--overwrite")
    assert result.exit_code == 2 and "are copies of one game name" in result.stderr
    result = invoke("eval", "-m", "programmatic", "-g", "nowhere:sayword")
    assert result.exit_code == 2
    assert "the copies are otherbench:sayword, toygames:sayword" in result.stderr


def test_clem_run_picks_the_first_registered_copy_too(shadow_workspace, clem_here):
    clem_here(["run", "-g", "sayword", "-m", "programmatic"], cwd=shadow_workspace)
    assert _experiments(shadow_workspace / "results" / "programmatic") == ["words"]


def test_rollout_takes_a_qualified_game_name(shadow_workspace, tiny_pair):
    from playpen.errors import RolloutError
    from playpen.rollouts import InstanceRef
    result = rollout("otherbench:sayword", make_learner(tiny_pair), records_dir=None, seed=0,
                     instances=[InstanceRef("otherbench:sayword", "shout", 0)])
    assert [(e.game, e.experiment) for e in result.episodes] == [("sayword", "shout")]
    with pytest.raises(RolloutError, match="are copies of one game name"):
        rollout(["sayword", "otherbench:sayword"], make_learner(tiny_pair), records_dir=None)


# ----------------------------------------------------------------------------- 3. side calls, pseudo turns

def test_side_calls_are_batched_recorded_and_trainable(toy_workspace, tiny_pair, monkeypatch):
    spy = GenerateSpy(monkeypatch)
    learner = make_learner(tiny_pair, max_new_tokens=5)
    tokenizer = tiny_pair[1]
    result = rollout("probes", learner, seed=0)
    # 3 episodes in lock-step: turn, probe (inside the step), turn, probe: one generate each
    assert spy.batch_sizes == [3, 3, 3, 3]
    assert result.stats.num_side_calls == 6 and result.stats.num_learner_turns == 6
    for episode in result.episodes:
        assert episode.error is None and len(episode.side_calls) == 2
        turns = [t for t in episode.trajectories if t.side_call is None]
        sides = [t for t in episode.trajectories if t.side_call is not None]
        assert len(turns) == 1 and turns[0].num_turns == 2 and [t.side_call for t in sides] == [0, 1]
        for trajectory, call in zip(sides, episode.side_calls):
            assert call.player_name == "Player 1" and call.role == "Keeper" and call.responder == "learner"
            assert call.messages[-1]["content"].startswith("ASIDE: have you named")
            assert all(trajectory.env_mask) and len(trajectory.logprobs) == len(trajectory.completion_ids)
            assert tokenizer.decode(trajectory.completion_ids, skip_special_tokens=True) == call.response
            assert "ASIDE" in tokenizer.decode(trajectory.prompt_ids)
            assert trajectory.reward == turns[0].reward and trajectory.role == "Keeper"
        # the player's own conversation never saw the probes (memorize=False)
        assert "ASIDE" not in tokenizer.decode(turns[0].completion_ids)
        meta = json.loads((episode.path / "episode.json").read_text())
        assert [c["response"] for c in meta["side_calls"]] == [c.response for c in episode.side_calls]
    again = rollout("probes", learner, seed=0, records_dir=None)  # game code runs in a fixed order
    assert [c.response for e in again.episodes for c in e.side_calls] == \
        [c.response for e in result.episodes for c in e.side_calls]
    # a frozen HF teacher's side calls are batched and recorded as well
    teacher = rollout("probes", learner, partners={"Keeper": make_learner(tiny_pair, name="teacher")},
                      records_dir=None, seed=0)
    assert {c.responder for e in teacher.episodes for c in e.side_calls} == {"teacher"}
    assert not teacher.trajectories


def test_dataset_keeps_side_calls_and_drops_pseudo_turns(toy_workspace, tiny_pair):
    result = rollout("probes", make_learner(tiny_pair, max_new_tokens=5), seed=0)
    out = toy_workspace / "probes.jsonl"
    done = invoke("dataset", str(result.run_dir), "-o", str(out))
    assert done.exit_code == 0, done.output
    assert "wrote 9 records from 3 episodes" in done.stdout
    records = [json.loads(line) for line in out.read_text().splitlines()]
    turns = [r for r in records if "side_call" not in r["meta"]]
    sides = [r for r in records if "side_call" in r["meta"]]
    assert len(turns) == 3 and [r["meta"]["side_call"] for r in sides] == [0, 1] * 3
    for record in turns:  # the pseudo "Ok." is not the model's: no assistant message for it
        assistant = [m["content"] for m in record["messages"] if m["role"] == "assistant"]
        assert "Ok." not in assistant and len(assistant) == 2
        assert record["messages"][0]["content"].startswith("We play a memory game")
    episode = result.episodes[0]
    first = next(r for r in sides if r["meta"]["game_id"] == episode.game_id and r["meta"]["side_call"] == 0)
    assert first["messages"][-1] == {"role": "assistant", "content": episode.side_calls[0].response}
    assert first["messages"][-2]["content"].startswith("ASIDE")


def test_dataset_reports_why_episodes_gave_no_record(toy_workspace):
    assert invoke("eval", "-m", "programmatic", "-g", "probes").exit_code == 0
    out = toy_workspace / "none.jsonl"
    done = invoke("dataset", "results", "-o", str(out))
    assert done.exit_code == 0, done.output
    assert "wrote 0 records from 3 episodes" in done.stdout
    assert "3 episode(s) gave no record: 3 had only programmatic players (see --include-programmatic)" \
        in done.stderr
    out = toy_workspace / "demos.jsonl"
    done = invoke("dataset", "results", "-o", str(out), "--include-programmatic")
    assert "wrote 3 records from 3 episodes" in done.stdout and "gave no record" not in done.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert all("Ok." not in [m["content"] for m in r["messages"] if m["role"] == "assistant"] for r in records)


# ----------------------------------------------------------------------------- playpen check

def test_playpen_check_command(toy_workspace):
    from conftest import FIXTURES_DIR
    assert "check" in invoke("--help").output
    result = invoke("check", "interview")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "playpen check interview" and lines[-1] == "OK: 11 pass, 1 warn"
    assert any(line.startswith("WARN  player_slots:") and "slot 1 unused" in line for line in lines)
    result = invoke("check", str(FIXTURES_DIR / "unloadable_games" / "needsdep"))
    assert result.exit_code == 1
    assert any(line.startswith("FAIL  master_import:") and "playpen_fixture_missing_dependency" in line
               for line in result.stdout.splitlines())
    assert result.stdout.splitlines()[-1].startswith("FAILED: ")


# ----------------------------------------------------------------------------- 8. CPU threads under eval

def test_eval_plays_a_local_cpu_model_with_one_torch_thread(toy_workspace, monkeypatch):
    import torch
    from playpen import evaluation
    seen = []
    original = evaluation.play_games

    def spy(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return original(*args, **kwargs)
    monkeypatch.setattr(evaluation, "play_games", spy)
    before = torch.get_num_threads()
    for extra in ([], ["--threads", "0", "--overwrite"], ["--threads", "3", "--overwrite"]):
        result = invoke("eval", "-m", "tiny-random", "-g", "sayword", "-n", "1", "-L", "2", *extra)
        assert result.exit_code == 0, result.output
    assert seen == [1, before, 3] and torch.get_num_threads() == before
    assert invoke("eval", "-m", "programmatic", "-g", "sayword").exit_code == 0
    assert seen[-1] == before  # no local model: torch's default
