"""The game contract checker (playpen.envs.check) on the toy games and on purpose-built
broken games (tests/fixtures/broken_games/, one defect each)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rollout_helpers import TOYGAMES_DIR

from playpen.envs.check import CHECKS, CheckReport, check_game

BROKEN = Path(__file__).resolve().parent / "fixtures" / "broken_games"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    """clemcore's log and any registry lookups stay in a tmp working directory."""
    monkeypatch.chdir(tmp_path)


def statuses(report: CheckReport) -> dict:
    return {r.name: r.status for r in report.results}


def only(report: CheckReport, **expected) -> None:
    """Every check passed except ``expected`` (name -> status); names are CHECKS, in order."""
    assert [r.name for r in report.results] == list(CHECKS)
    assert statuses(report) == {name: expected.get(name, "pass") for name in CHECKS}, "\n".join(report.lines())


@pytest.mark.parametrize("game", ["relay", "countdown", "sayword"])
def test_toy_games_pass(game):
    report = check_game(TOYGAMES_DIR / game)
    only(report)
    assert report.ok and report.lines()[-1] == "OK: 12 pass"


def test_a_registered_name_resolves(tmp_path):
    (tmp_path / "game_registry.json").write_text(json.dumps([{"benchmark_path": str(TOYGAMES_DIR)}]))
    report = check_game("countdown", num_episodes=3)
    only(report)  # the legacy master API
    assert "3 episode(s) ended" in report.get("episode_ends").message
    assert "clemgame.json" in report.get("clemgame_json").message


def test_an_unknown_name_fails_the_first_check_and_skips_the_rest():
    report = check_game("no_such_game")
    assert statuses(report) == {"clemgame_json": "fail", **{name: "skip" for name in CHECKS[1:]}}
    assert "unknown game 'no_such_game'" in report.get("clemgame_json").message and not report.ok


def test_malformed_clemgame_json_names_file_line_and_column():
    report = check_game(BROKEN / "malformed_spec")
    assert statuses(report) == {"clemgame_json": "fail", **{name: "skip" for name in CHECKS[1:]}}
    message = report.get("clemgame_json").message
    assert "broken_games/malformed_spec/clemgame.json:5:3: malformed JSON" in message


def test_missing_instances_file_still_checks_the_master():
    report = check_game(BROKEN / "missing_instances")
    assert statuses(report)["master_import"] == "pass"
    assert statuses(report)["instances_file"] == "fail"
    message = report.get("instances_file").message
    assert "missing_instances/in/instances_v2.json: missing" in message and "files in in/: instances" in message
    assert report.get("player_slots").message == "not run: instances_file did not pass"


def test_import_error_names_the_module_and_the_file():
    report = check_game(BROKEN / "import_error")
    assert statuses(report)["master_import"] == "fail"
    message = report.get("master_import").message
    lines = (BROKEN / "import_error" / "master.py").read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if text.startswith("import playpen_check_missing_dependency"))
    assert f"import_error/master.py:{line}: ModuleNotFoundError" in message
    assert "'playpen_check_missing_dependency'" in message and "Traceback" not in message


def test_a_game_that_never_ends():
    report = check_game(BROKEN / "endless", max_steps=20)
    only(report, episode_ends="fail", episode_scores="skip", episode_outcome="skip", fork="skip", model_players="skip")
    message = report.get("episode_ends").message
    assert "broken_games/endless" in message and "did not end within 20 steps" in message


def test_a_scorer_without_main_score():
    report = check_game(BROKEN / "no_main_score")
    only(report, episode_scores="fail", model_players="skip")
    message = report.get("episode_scores").message
    assert "no_main_score/master.py:" in message and "did not log 'Main Score'" in message


def test_a_master_that_never_logs_the_outcome_fails_scoring_with_a_hint():
    report = check_game(BROKEN / "unlogged_outcome")
    only(report, episode_scores="fail", episode_outcome="skip", fork="skip", model_players="skip")
    message = report.get("episode_scores").message
    assert "unlogged_outcome/master.py:" in message and "KeyError: 'Aborted'" in message
    assert "the master never logged Aborted, Success, Lose" in message


def test_fewer_model_backed_players_than_declared_is_a_warning():
    report = check_game(BROKEN / "one_model_player")
    only(report, player_slots="warn")
    assert report.ok
    message = report.get("player_slots").message
    assert "one_model_player/master.py" in message and "declares 2" in message
    assert "slot 0 -> Player 2 (Answerer); slot 1 unused; the game creates Player 1 (Questioner) itself" in message


def test_state_that_cannot_be_deep_copied_is_a_warning():
    report = check_game(BROKEN / "uncopyable")
    only(report, fork="warn")
    assert report.ok
    message = report.get("fork").message
    assert "uncopyable/master.py" in message and "Master.lock" in message and "cannot be deep-copied" in message


def test_players_without_programmatic_answers_get_a_fixed_one():
    report = check_game(BROKEN / "no_custom_response")
    only(report, programmatic_players="warn")
    assert "Player 1 (Sayer, class Sayer)" in report.get("programmatic_players").message


def test_several_specs_in_one_file_are_checked_each():
    report = check_game(BROKEN / "variants")
    names = [r.name for r in report.results]
    assert names == ["clemgame_json"] + [f"{n}[broken_variants_ok]" for n in CHECKS[1:]] + \
        [f"{n}[broken_variants_dup]" for n in CHECKS[1:]]
    assert all(r.status == "pass" for r in report.results if r.name.endswith("[broken_variants_ok]"))
    message = report.get("instances_file[broken_variants_dup]").message
    assert "variants/in/instances_dup.json" in message
    for problem in ("experiment 'words': duplicate game_id 0", "instance 2: 'game_id' is '2', expected an int",
                    "experiment 'empty' has no non-empty 'game_instances' list"):
        assert problem in message


def test_main_prints_the_report_and_returns_the_exit_status(capsys):
    from playpen.envs.check import main
    assert main([str(TOYGAMES_DIR / "sayword"), "--num-episodes", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("playpen check ") and out.strip().endswith("OK: 12 pass")
    assert main([str(BROKEN / "no_main_score")]) == 1
    assert "FAIL  episode_scores: " in capsys.readouterr().out


def test_python_dash_m_exits_1_on_failures_without_a_traceback(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))  # this checkout's playpen
    done = subprocess.run([sys.executable, "-m", "playpen.envs.check", str(BROKEN / "import_error")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, check=False, env=env)
    assert done.returncode == 1, done.stderr
    assert "FAIL  master_import: " in done.stdout and done.stdout.strip().endswith("FAILED: 2 pass, 1 fail, 9 skip")
    assert "Traceback" not in done.stdout + done.stderr


def test_a_game_that_never_ends_with_a_model_player_is_found():
    """stubborn asks again after every reply in a wrong format: a model that never finds the
    format once played one `playpen eval` episode for 9.5 minutes."""
    report = check_game(TOYGAMES_DIR / "stubborn", max_steps=30)
    only(report, model_players="warn")
    message = report.get("model_players").message
    assert "experiment 'pick' game_id 0 did not end within 30 steps when every model player replies in no " \
           "format" in message and "--max-turns" in message
    report = check_game(TOYGAMES_DIR / "relay")  # it aborts on a wrong format
    assert report.get("model_players").message.startswith("experiment 'short' game_id 0 ended (aborted) after 1")


def test_side_calls_of_model_players_get_the_stand_in_reply_too():
    report = check_game(TOYGAMES_DIR / "oracle")
    assert report.get("model_players").status == "pass"
    assert "ended (failure)" in report.get("model_players").message  # oracle's answers were wrong


def test_verdicts_on_random_programmatic_players_are_seeded():
    """stubborn's programmatic Mover draws its move with `random`: the outcomes once varied."""
    def outcomes(seed):
        return check_game(TOYGAMES_DIR / "stubborn", num_episodes=4, seed=seed).get("episode_outcome").message
    first = outcomes(0)
    import random
    random.seed()  # whatever the state before, the same seed gives the same verdicts
    assert all(outcomes(0) == first for _ in range(3))
    assert len({outcomes(seed) for seed in range(6)}) > 1  # the seed does decide
    from click.testing import CliRunner

    from playpen.cli import cli
    result = CliRunner().invoke(cli, ["check", str(TOYGAMES_DIR / "stubborn"), "-n", "4", "--seed", "0"])
    assert result.exit_code == 0 and f"PASS  episode_outcome: {first}" in result.output
