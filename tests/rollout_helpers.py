"""Helpers of the rollout tests (plain functions; the fixtures are in conftest.py)."""
from pathlib import Path

TOYGAMES_DIR = Path(__file__).resolve().parent / "toygames"


def make_learner(tiny_pair, temperature=1.0, max_new_tokens=6, name="tiny-random"):
    from playpen.rollouts import Learner, SamplingConfig
    model, tokenizer = tiny_pair
    return Learner(model, tokenizer, name, SamplingConfig(temperature=temperature, max_new_tokens=max_new_tokens))


class GenerateSpy:
    """Wraps playpen.rollouts.generation.generate and records the batch size of every call."""

    def __init__(self, monkeypatch):
        import playpen.rollouts.generation as generation
        self.batch_sizes = []
        original = generation.generate

        def spy(model, tokenizer, prompts, sampling, *args, **kwargs):
            self.batch_sizes.append(len(prompts))
            return original(model, tokenizer, prompts, sampling, *args, **kwargs)

        monkeypatch.setattr(generation, "generate", spy)
