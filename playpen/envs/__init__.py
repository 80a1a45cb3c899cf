"""Turn-based envs over clemcore game masters, loading games for them, and a contract
checker for third-party games (:mod:`playpen.envs.check`)."""
from playpen.envs.game import (EpisodeLog, GameEnv, Observation, Response, StepResult, make_env,
                               score_episode)
from playpen.envs.loading import PlayerSlot, game_instance_rows, load_benchmark, probe_roles
from playpen.outcomes import outcome_of

__all__ = ["GameEnv", "Observation", "Response", "EpisodeLog", "StepResult", "make_env", "outcome_of",
           "score_episode", "load_benchmark", "game_instance_rows", "probe_roles", "PlayerSlot"]
