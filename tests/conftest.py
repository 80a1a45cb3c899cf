"""Shared fixtures: temporary clem workspaces, a runner for the real `clem` CLI."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
GAMES_DIR = REPO_ROOT / "playpen" / "games"
FIXTURES_DIR = REPO_ROOT.parent / "shared" / "fixtures"


def clem_executable() -> str:
    """The `clem` console script of the interpreter running the tests."""
    candidate = Path(sys.executable).parent / "clem"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("clem")
    if found is None:
        raise RuntimeError("clem console script not found next to the test interpreter")
    return found


@pytest.fixture
def clem_workspace(tmp_path):
    """An empty working directory whose game_registry.json points at playpen's games."""
    (tmp_path / "game_registry.json").write_text(
        json.dumps([{"benchmark_path": str(GAMES_DIR)}]), encoding="utf-8")
    return tmp_path


def run_clem(args, cwd, timeout=600, input_text=None):
    """Run the real `clem` CLI in `cwd`; returns the CompletedProcess (exit codes are
    not meaningful for clem: check the files it writes)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return subprocess.run([clem_executable(), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=env, input=input_text)


@pytest.fixture
def clem():
    return run_clem
