"""Results -> conversational datasets: both layouts, filters, malformed folders, CLI."""
import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from rollout_helpers import make_learner

from playpen.cli import cli
from playpen.data import DatasetFilter, DatasetError, conversational_records, episode_folders, episode_records

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "clembench-runs-v2.0"
META_KEYS = {"game", "experiment", "game_id", "player_name", "game_role", "model", "outcome"}


def _expected_outcomes():
    """(model letter, game, experiment folder, episode) -> outcome, from the fixtures' README."""
    table = {}
    for line in (FIXTURES / "README.md").read_text().splitlines():
        m = re.match(r"\| (L|G) \| (\w+) \| (\S+) \| (episode_\d+) \| [^|]+ \| (\w+) \|", line)
        if m:
            table[m.groups()[:4]] = {"lose": "failure"}.get(m[5], m[5])
    return table


def test_legacy_layout_outcomes_match_the_published_table():
    expected = _expected_outcomes()
    assert len(expected) == 41
    checked = 0
    for folder in episode_folders(FIXTURES):
        letter = "L" if folder.parents[2].name.startswith("Meta") else "G"
        records = episode_records(folder)
        key = (letter, folder.parent.parent.name, folder.parent.name, folder.name)
        if not records:  # privateshared aborted during the first probing: no dialogue turn at all
            assert key[1] == "privateshared" and expected[key] == "aborted"
            continue
        assert {r["meta"]["outcome"] for r in records} == {expected[key]}, key
        checked += 1
    assert checked == 39


def test_legacy_layout_records():
    records, report = conversational_records(FIXTURES)
    assert report.num_episodes == 41 and report.num_skipped == 0 and len(records) == 59
    for record in records:
        assert set(record["meta"]) == META_KEYS
        roles = [m["role"] for m in record["messages"]]
        assert roles[0] == "user" and roles[-1] == "assistant"
        assert all(a != b for a, b in zip(roles, roles[1:]))  # alternating
        assert record["meta"]["model"] in ("Meta-Llama-3.1-8B-Instruct", "gpt-4o-2024-08-06")
    # the Player_1 key quirk: referencegame players are found and given their roles
    reference = [r["meta"] for r in records if r["meta"]["game"] == "referencegame"]
    assert {(m["player_name"], m["game_role"]) for m in reference} == {
        ("Player 1", "Instruction Giver"), ("Player 2", "Instruction Follower")}
    taboo = [r for r in records if r["meta"]["game"] == "taboo"]
    assert {r["meta"]["game_role"] for r in taboo} == {"WordDescriber", "WordGuesser"}
    assert {r["meta"]["experiment"] for r in taboo} == {"high_en", "low_en"}
    # programmatic players (wordle's evaluator, privateshared's questioner) get no record
    assert not [r for r in records if "Programmatic" in r["meta"]["model"]]
    guesser = next(r for r in taboo if r["meta"]["game_role"] == "WordGuesser")
    assert guesser["messages"][-1]["content"].startswith("GUESS")


def test_include_programmatic_adds_the_programmatic_players():
    records, _ = conversational_records(FIXTURES)
    everyone, report = conversational_records(FIXTURES, include_programmatic=True)
    extra = [r for r in everyone if r not in records]
    assert len(everyone) == len(records) + len(extra) == report.num_records == 62
    assert {(r["meta"]["game"], r["meta"]["game_role"], r["meta"]["model"]) for r in extra} == {
        ("privateshared", "Questioner", "Programmatic")}
    assert all(set(r["meta"]) == META_KEYS and r["messages"][-1]["role"] == "assistant" for r in extra)


def test_filters():
    keep = DatasetFilter(games=("taboo", "wordle"), outcomes=("lose",))
    records, report = conversational_records(FIXTURES, keep)
    assert records and {r["meta"]["game"] for r in records} <= {"taboo", "wordle"}
    assert {r["meta"]["outcome"] for r in records} == {"failure"}
    assert report.num_filtered_out == 59 - len(records)
    with pytest.raises(DatasetError, match="unknown outcome 'won'"):
        DatasetFilter(outcomes=("won",))
    with pytest.raises(DatasetError, match="unknown role 'Guesser'.*Did you mean: .*WordGuesser"):
        conversational_records(FIXTURES, DatasetFilter(roles=("Guesser",)))


def test_malformed_and_partial_folders_are_reported_and_skipped(tmp_path):
    root = tmp_path / "runs"
    shutil.copytree(FIXTURES, root)
    taboo = root / "gpt-4o-2024-08-06-t0.0--gpt-4o-2024-08-06-t0.0" / "taboo" / "0_high_en"
    (taboo / "episode_0" / "interactions.json").write_text('{"players": {"GM": "x"}, "turns": [[{')
    (taboo / "episode_12" / "interactions.json").unlink()
    (taboo / "episode_12" / "instance.json").write_text("{}")
    broken = root / "m" / "relay" / "short" / "instance_00007"
    broken.mkdir(parents=True)
    (broken / "error.json").write_text('{"error": "ValueError"}')
    records, report = conversational_records(root)
    assert report.num_skipped == 3 and report.num_episodes == 39
    reasons = dict(report.skipped)
    assert "malformed interactions.json" in reasons[str(taboo / "episode_0")]
    assert "partial" in reasons[str(taboo / "episode_12")]
    assert "error.json" in reasons[str(broken)]
    assert any("skipped 3 malformed or partial" in line for line in report.lines())


def test_playpen_rollout_records_convert(toy_workspace, tiny_pair):
    from playpen.rollouts import rollout
    result = rollout("relay", make_learner(tiny_pair), partners={"Listener": "programmatic"},
                     instances=lambda row: row["experiment"]["name"] == "lenient", run_name="toconvert")
    records, report = conversational_records(result.run_dir)
    assert report.num_episodes == 3 and report.num_skipped == 0
    assert len(records) == 3  # the programmatic Listener gets none
    for record, episode in zip(records, result.episodes):
        meta = record["meta"]
        assert meta == {"game": "relay", "experiment": "lenient", "game_id": episode.game_id,
                        "player_name": "Player 1", "game_role": "Speaker", "model": "tiny-random",
                        "outcome": episode.outcome}
        trajectory = episode.trajectories[0]
        assistant = [m["content"] for m in record["messages"] if m["role"] == "assistant"]
        assert assistant == [m["content"] for m in trajectory.messages if m["role"] == "assistant"]


def test_cli_writes_a_loadable_dataset(tmp_path):
    out = tmp_path / "data" / "taboo.jsonl"
    result = CliRunner().invoke(cli, ["dataset", str(FIXTURES), "-o", str(out), "-g", "taboo"])
    assert result.exit_code == 0, result.output
    assert "wrote 12 records from 41 episodes" in result.output
    from datasets import load_dataset
    data = load_dataset("json", data_files=str(out), split="train")
    assert len(data) == 12 and set(data[0]["meta"]) == META_KEYS
    assert data[0]["messages"][0]["role"] == "user"


def test_cli_include_programmatic(tmp_path):
    out = tmp_path / "ps.jsonl"
    for flags, expected in (([], 3), (["--include-programmatic", "--overwrite"], 6)):
        result = CliRunner().invoke(cli, ["dataset", str(FIXTURES), "-o", str(out), "-g", "privateshared", *flags])
        assert result.exit_code == 0, result.output
        assert f"wrote {expected} records from 41 episodes" in result.output
        models = {json.loads(line)["meta"]["model"] for line in out.read_text().splitlines()}
        assert ("Programmatic" in models) == bool(flags)


def test_cli_refuses_to_replace_an_existing_output(tmp_path):
    out = tmp_path / "taboo.jsonl"
    out.write_text("keep me\n")
    for extra in ([], ["--pairs"]):
        result = CliRunner().invoke(cli, ["dataset", str(FIXTURES), "-o", str(out), "-g", "taboo", *extra])
        assert result.exit_code == 2 and "exists: pass --overwrite" in result.output, result.output
        assert result.output.count("\n") == 1 and out.read_text() == "keep me\n"
    result = CliRunner().invoke(cli, ["dataset", str(FIXTURES), "-o", str(out), "-g", "taboo", "--overwrite"])
    assert result.exit_code == 0, result.output
    assert len(out.read_text().splitlines()) == 12


@pytest.mark.parametrize("args, message", [
    (["/does/not/exist"], "results folder '/does/not/exist' does not exist"),
    ([str(FIXTURES), "--outcome", "won"], "unknown outcome 'won'"),
    ([str(FIXTURES), "-g", "tabooo"], "unknown game 'tabooo'.*Did you mean: taboo"),
])
def test_cli_user_errors(tmp_path, args, message):
    result = CliRunner().invoke(cli, ["dataset", *args, "-o", str(tmp_path / "x.jsonl")])
    assert result.exit_code == 2
    assert re.search(message, result.output), result.output
    assert result.output.count("\n") == 1 and result.output.startswith("playpen: error:")
    assert not (tmp_path / "x.jsonl").exists()


def test_example_data_utils(tmp_path):
    import subprocess
    import sys
    script = Path(__file__).resolve().parents[1] / "examples" / "trl" / "data_utils.py"
    out = tmp_path / "w.jsonl"
    done = subprocess.run([sys.executable, str(script), str(FIXTURES), str(out), "wordle"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert len(out.read_text().splitlines()) == 6


def test_example_data_utils_with_one_argument_writes_results_jsonl_beside_it(tmp_path):
    """Upstream playpen's README form: `python examples/trl/data_utils.py RESULTS_DIR`."""
    import os
    import shutil
    import subprocess
    import sys
    repo = Path(__file__).resolve().parents[1]
    script = tmp_path / "examples" / "trl" / "data_utils.py"
    script.parent.mkdir(parents=True)
    shutil.copy(repo / "examples" / "trl" / "data_utils.py", script)
    env = dict(os.environ, PYTHONPATH=str(repo))
    done = subprocess.run([sys.executable, str(script), str(FIXTURES)], capture_output=True, text=True,
                          timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    written = script.parent / "results.jsonl"
    assert len(written.read_text().splitlines()) > 6 and "records from" in done.stdout
    written.write_text("precious\n")
    done = subprocess.run([sys.executable, str(script), str(FIXTURES)], capture_output=True, text=True,
                          timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.strip().endswith("or remove it") and "Traceback" not in done.stderr
    assert written.read_text() == "precious\n"
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "nothing"), str(tmp_path / "o.jsonl")],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 2 and "does not exist" in done.stderr and "Traceback" not in done.stderr


def test_probe_only_episodes_are_counted_by_their_real_reason():
    """2.x privateshared episodes that aborted while probing: the Answerer answered probes only."""
    _, report = conversational_records(FIXTURES)
    reasons = [reason for _, reason in report.no_record]
    assert reasons == ["had players who answered only in side calls ('probe answer' events, no turn)"] * 2
