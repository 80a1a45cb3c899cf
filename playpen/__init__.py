"""playpen: train language models by learning in interaction (dialogue games).

Public API only; importing playpen has no side effects and imports no heavy module:
every name below is imported on first use (module ``__getattr__``).

The rollout function lives in its module: ``from playpen.rollouts import rollout``.
"""

__version__ = "0.1.0"

# exported name -> the module that defines it
_EXPORTS = {
    "BasePlayPen": "playpen.training.common.base",
    "RunConfig": "playpen.training.common.config",
    "LoraOptions": "playpen.training.common.config",
    "DemonstrationOptions": "playpen.training.common.config",
    "BaseCallback": "playpen.callbacks",
    "EpisodeSummary": "playpen.callbacks",
    "rollout": "playpen.rollouts",
    "Learner": "playpen.rollouts",
    "SamplingConfig": "playpen.rollouts",
    "Branching": "playpen.rollouts",
    "InstanceRef": "playpen.rollouts",
    "Trajectory": "playpen.rollouts",
    "EpisodeResult": "playpen.rollouts",
    "RolloutResult": "playpen.rollouts",
    "GameEnv": "playpen.envs",
    "Response": "playpen.envs",
    "OutcomeReward": "playpen.rewards",
    "EpisodeOutcome": "playpen.outcomes",
    "load_model_by_name": "playpen.models",
    "evaluate": "playpen.evaluation",
    "PlaypenError": "playpen.errors",
}

__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name):
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'playpen' has no attribute {name!r}")
    import importlib
    module = importlib.import_module(module_name)
    return getattr(module, name)


def __dir__():
    return sorted({*globals(), *_EXPORTS})
