"""Records: clemcore 3.x layout, clem score/eval/transcribe on it, atomic writes."""
import json
import os

import pytest

from rollout_helpers import make_learner

from playpen.rollouts.records import RecordsError, RunWriter, episode_dir_name
from playpen.rollouts import Branching, InstanceRef, rollout


def _episode_dirs(run_dir):
    return sorted(p.parent for p in run_dir.rglob("instance.json"))


def test_layout_and_clem_tools_on_branched_run(toy_workspace, tiny_pair):
    from playpen.clem import clemcore
    clemcore()
    import clemcore.cli as clem_cli
    from clemcore import clemeval

    result = rollout(["relay", "sayword"], make_learner(tiny_pair), partners={"Listener": "programmatic"},
                     branching=Branching(factor=2), run_name="branched",
                     instances=[InstanceRef("relay", "short", 0), InstanceRef("sayword", "words", 0)])
    run_dir = toy_workspace / "playpen-records" / "branched"
    assert result.run_dir == run_dir
    assert (run_dir / "tiny-random--programmatic" / "run.json").exists()
    assert (run_dir / "tiny-random" / "run.json").exists()
    assert (run_dir / "tiny-random--programmatic" / "relay" / "short" / "experiment.json").exists()
    episodes = _episode_dirs(run_dir)
    assert [p.name for p in episodes] == ["instance_00000_b0", "instance_00000_b1"] * 2
    for folder in episodes:
        for name in ("interactions.json", "player_1.requests.json", "episode.json", "completed.json"):
            json.loads((folder / name).read_text())
        meta = json.loads((folder / "episode.json").read_text())
        assert meta["branch_path"] in ([0], [1]) and meta["parent_id"].endswith("/r0")
    run = json.loads((run_dir / "tiny-random" / "run.json").read_text())
    assert run["games"]["sayword"]["num_instances"] == 2 and "duration" in run["games"]["sayword"]
    assert not list(toy_workspace.glob("playpen-records/.staging-*"))

    # clemcore's own tools work on the folder unchanged, branch episodes included
    for game in ("relay", "sayword"):
        clem_cli.score(game, results_dir=str(run_dir))
    scored = sorted(p.parent for p in run_dir.rglob("scores.json"))
    assert scored == episodes
    clemeval.perform_evaluation(str(run_dir))
    table = (run_dir / "results.csv").read_text()
    assert "tiny-random--programmatic" in table and "tiny-random" in table
    clem_cli.transcripts("all", results_dir=str(run_dir))
    assert all((p / "transcript.html").exists() for p in episodes)


def test_interrupted_run_leaves_only_complete_episodes(toy_workspace, tiny_pair, monkeypatch):
    import playpen.rollouts.records as records
    original = records.write_json
    calls = {"n": 0}

    def crash_on_the_ninth_file(path, data, **kwargs):
        calls["n"] += 1
        if calls["n"] == 9:
            raise KeyboardInterrupt  # as if the process were stopped mid-episode
        return original(path, data, **kwargs)

    monkeypatch.setattr(records, "write_json", crash_on_the_ninth_file)
    with pytest.raises(KeyboardInterrupt):
        rollout("sayword", make_learner(tiny_pair), run_name="interrupted")
    run_dir = toy_workspace / "playpen-records" / "interrupted"
    episodes = _episode_dirs(run_dir)
    assert episodes, "the episodes finished before the crash are kept"
    for folder in episodes:
        assert (folder / "completed.json").exists()
        for file in folder.iterdir():
            json.loads(file.read_text())
    leftovers = [p for p in run_dir.rglob("*") if p.name.startswith(".") or p.suffix == ".tmp"]
    assert leftovers == []


def test_runs_are_never_reused(toy_workspace):
    first = RunWriter(toy_workspace / "records", "same")
    with pytest.raises(RecordsError, match="never reused"):
        RunWriter(toy_workspace / "records", "same")
    assert RunWriter(toy_workspace / "records").run_dir != RunWriter(toy_workspace / "records").run_dir
    assert first.run_dir.is_dir()


def test_episode_dir_names():
    assert episode_dir_name(3) == "instance_00003"
    assert episode_dir_name(3, 2) == "instance_00003_r2"
    assert episode_dir_name(3, 0, (1, 0)) == "instance_00003_b1.0"


def test_atomic_json_write_leaves_no_temp_files(tmp_path):
    from playpen.files import write_json
    target = tmp_path / "a" / "x.json"
    write_json(target, {"v": float("nan")})
    with pytest.raises(TypeError):
        write_json(target, {"bad": object.__new__(type("X", (), {"isoformat": 1}))})
    assert json.loads(target.read_text(), parse_constant=str) == {"v": "NaN"}
    assert os.listdir(target.parent) == ["x.json"]
