"""Turn-based envs over clemcore game masters, and loading games for them."""
from playpen.envs.game import GameEnv, Observation, StepResult, make_env, outcome_of, score_episode
from playpen.envs.loading import game_instance_rows, load_benchmark, probe_roles, PlayerSlot

__all__ = ["GameEnv", "Observation", "StepResult", "make_env", "outcome_of", "score_episode",
           "load_benchmark", "game_instance_rows", "probe_roles", "PlayerSlot"]
