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
    from playpen.training.grpo import game_roles
    names, rows = game_roles("interview", "instances")
    assert names == ["Answerer"] and len(rows) == 2
