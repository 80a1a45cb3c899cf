"""playpen: train language models by learning in interaction (dialogue games).

Public API only; importing playpen has no side effects and imports no heavy module:
every name below is imported on first use (module ``__getattr__``).

The rollout function lives in its module: ``from playpen.rollout import rollout``.
"""

__version__ = "0.1.0"

# exported name -> the module that defines it
_EXPORTS = {
    "BasePlayPen": "playpen.base",
    "BaseCallback": "playpen.callbacks",
    "EpisodeSummary": "playpen.callbacks",
    "Learner": "playpen.rollout",
    "SamplingConfig": "playpen.rollout",
    "Branching": "playpen.rollout",
    "InstanceRef": "playpen.rollout",
    "Trajectory": "playpen.rollout",
    "EpisodeResult": "playpen.rollout",
    "RolloutResult": "playpen.rollout",
    "GameEnv": "playpen.envs",
    "OutcomeReward": "playpen.rewards",
    "evaluate": "playpen.evaluation",
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
