"""A workspace anywhere: `playpen setup` in an empty folder (the converted model stays in
the per-user cache, the folder gets registries that the real `clem` CLI reads), output
files that follow the umask, and no clembench.log in the folder a command runs in."""
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from playpen import default_model
from playpen.cli import cli

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_models_cache_is_per_user_and_overridable(tmp_path, monkeypatch):
    monkeypatch.delenv(default_model.MODELS_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)
    assert default_model.default_model_dir() == tmp_path / "xdg" / "playpen" / "models" / "smol-135m"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_model.models_dir() == tmp_path / "home" / ".cache" / "playpen" / "models"
    monkeypatch.setenv(default_model.MODELS_DIR_ENV, str(tmp_path / "mine"))
    assert default_model.default_model_dir() == tmp_path / "mine" / "smol-135m"
    from playpen.registry import resolve_model
    assert resolve_model("smol-135m").spec["huggingface_id"] == str(tmp_path / "mine" / "smol-135m")


def test_setup_in_an_empty_folder_makes_a_workspace_for_clem_and_playpen(tmp_path, smol_tokenizer_dir, clem_here,
                                                                         monkeypatch):
    """`pip install` users once got a 540 MB copy of the model per folder and no
    game_registry.json, so `clem run -g taboo -m programmatic` failed with "No games found"."""
    workspace = tmp_path / "anywhere"
    workspace.mkdir()
    exe = Path(sys.executable).parent / "playpen"
    done = subprocess.run([str(exe), "setup", "--no-verify"], cwd=workspace, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    assert f"default model smol-135m ready: {smol_tokenizer_dir}" in done.stdout
    assert sorted(p.name for p in workspace.iterdir()) == ["game_registry.json", "model_registry.json"]
    models = json.loads((workspace / "model_registry.json").read_text())
    assert models[0]["model_name"] == "smol-135m" and models[0]["huggingface_id"] == str(smol_tokenizer_dir)
    # idempotent, and the user's files are kept (the console script ran above: the rest runs
    # its commands in this process, in the folder, sparing an interpreter's start each)
    monkeypatch.chdir(workspace)
    again = CliRunner().invoke(cli, ["setup", "--no-verify"])
    assert again.exit_code == 0 and again.output.count("kept existing") == 2, again.output

    listed = CliRunner().invoke(cli, ["list", "games"])
    assert listed.exit_code == 0 and "taboo" in listed.output and "referencegame" in listed.output

    clem_here(["run", "-g", "taboo", "-m", "programmatic", "-e", "high_en"], cwd=workspace)
    episodes = list((workspace / "results").rglob("interactions.json"))
    assert len(episodes) == 20, "clem found no games in the workspace"


def test_setup_notes_a_game_registry_without_playpens_games(tmp_path, monkeypatch, smol_tokenizer_dir):
    from playpen.cli.setup import setup
    (tmp_path / "game_registry.json").write_text("[]")
    lines = list(setup(verify=False, cwd=tmp_path))
    assert "does not name playpen's games" in lines[0]
    assert (tmp_path / "game_registry.json").read_text() == "[]"


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640)])
def test_output_files_follow_the_umask(toy_workspace, tiny_pair, umask, mode):
    """Output files were once written 0600 whatever the umask (mkstemp's mode)."""
    from rollout_helpers import make_learner
    from playpen.files import write_json
    from playpen.rollouts import rollout
    previous = os.umask(umask)
    try:
        result = rollout("relay", make_learner(tiny_pair), instances=lambda row: row["game_instance"]["game_id"] == 0,
                         run_name="umask")
        write_json(toy_workspace / "playpen-run.json", {"a": 1})
        evaluated = CliRunner().invoke(cli, ["eval", "-m", "programmatic", "-g", "relay", "-n", "1"])
        assert evaluated.exit_code == 0, evaluated.output
        dataset = CliRunner().invoke(cli, ["dataset", str(toy_workspace / "results"), "-o", "d.jsonl",
                                           "--include-programmatic"])
        assert dataset.exit_code == 0, dataset.output
    finally:
        os.umask(previous)
    written = [toy_workspace / "playpen-run.json", toy_workspace / "d.jsonl",
               toy_workspace / "results" / "programmatic" / "playpen-eval.json",
               *[p for p in result.episodes[0].path.iterdir() if p.suffix == ".json"]]
    assert len(written) > 4
    for path in written:
        assert stat.S_IMODE(path.stat().st_mode) == mode, path


def test_collecting_tests_writes_no_clembench_log_into_the_cwd(tmp_path):
    """Test modules import game masters (so clemcore) at collection time: clembench.log
    used to appear in the folder pytest ran in."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           str(REPO_ROOT / "tests" / "games" / "test_taboo.py")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert not (tmp_path / "clembench.log").exists()
