"""GameEnv over new and legacy clemcore masters: reset/observe/step, outcomes, fork."""
import math

import pytest


from playpen.envs import GameEnv, load_benchmark, game_instance_rows, probe_roles
from playpen.registry import game_spec


def _programmatic(n):
    from playpen.clem import clemcore
    return [clemcore().backends.CustomResponseModel() for _ in range(n)]


def _play(env):
    """Drive the env with the game's own programmatic players; returns the final StepResult."""
    while True:
        player, context = env.perceive()
        result = env.step(player._custom_response(context))
        if result.done:
            return result


@pytest.fixture
def benchmarks(toy_workspace):
    loaded = {}
    yield lambda name: loaded.setdefault(name, load_benchmark(name))
    for benchmark in loaded.values():
        benchmark.close()


def test_legacy_master_plays_to_success(benchmarks):
    benchmark = benchmarks("countdown")
    env = GameEnv(benchmark, _programmatic(1))
    rows = game_instance_rows(benchmark.game_spec)
    outcomes = []
    for row in rows:
        player, context = env.reset(row["experiment"], row["game_instance"])
        assert player.game_role == "NumberGuesser" and "NUMBER" in context["content"]
        result = _play(env)
        outcomes.append((result.outcome, result.main_score))
        assert env.done and result.rewards["Player 1"] > 0.5
    # binary search over 1..5: 3 in one attempt, 1 in two, 5 in three
    assert outcomes == [("success", 100.0), ("success", 50.0), ("success", pytest.approx(100 / 3))]
    with pytest.raises(RuntimeError, match="episode is over"):
        env.observe()


def test_new_master_abort_and_rewards(benchmarks):
    benchmark = benchmarks("relay")
    env = GameEnv(benchmark, _programmatic(2))
    row = game_instance_rows(benchmark.game_spec)[0]
    env.reset(row["experiment"], row["game_instance"])
    result = env.step("this is not the format")
    assert result.done and result.outcome == "aborted" and math.isnan(result.main_score)
    assert result.rewards == {"Player 1": -1.0, "Player 2": -1.0}
    assert env.interactions["Aborted"] == 1
    assert set(env.requests()) == {"player_1"}  # only the player that was asked


def test_fork_copies_game_state_not_models(benchmarks):
    benchmark = benchmarks("relay")
    models = _programmatic(2)
    env = GameEnv(benchmark, models)
    row = next(r for r in game_instance_rows(benchmark.game_spec) if r["experiment"]["name"] == "lenient")
    env.reset(row["experiment"], row["game_instance"])
    env.step("garbage")  # re-prompted: still Player 1's turn
    clone = env.fork()
    assert clone.game_master is not env.game_master
    for original, copied in zip(env.players, clone.players):
        assert copied is not original and copied.model is original.model
        assert copied.get_perspective() == original.get_perspective()
        assert copied.get_perspective() is not original.get_perspective()
    assert clone.player_models[0] is models[0] and clone.experiment is env.experiment
    clone_result = _play(clone)
    assert clone_result.outcome == "success"
    assert not env.done  # the original is untouched
    assert len(env.interactions["turns"]) < len(clone.interactions["turns"]) or \
        sum(map(len, env.interactions["turns"])) < sum(map(len, clone.interactions["turns"]))
    # the copy records into its own request log
    assert len(clone.request_recorders["Player 1"]) == len(env.request_recorders["Player 1"]) + 1
    assert _play(env).outcome == "success"


def test_probe_roles_maps_slots(benchmarks):
    benchmark = benchmarks("relay")
    slots, own = probe_roles(benchmark, game_instance_rows(benchmark.game_spec)[0])
    assert [(s.index, s.player_name, s.role) for s in slots] == [(0, "Player 1", "Speaker"),
                                                                  (1, "Player 2", "Listener")]
    assert own == []
    assert game_spec("sayword").players == 1


def test_make_env_with_programmatic_players_and_row_reset(toy_workspace):
    from playpen.envs import make_env
    env, rows = make_env("relay")
    try:
        player, context = env.reset(rows[0])  # one instance row
        assert player.name == "Player 1" and "apple" in context["content"]
        result = _play(env)
        assert (result.outcome, result.main_score) == ("success", 100.0)
        assert result.rewards == {"Player 1": 1.0, "Player 2": 1.0}
    finally:
        env.benchmark.close()
