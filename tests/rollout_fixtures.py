"""Fixtures for the rollout tests: a workspace with the toy games, the tiny learner."""
import json
from pathlib import Path

import pytest

TOYGAMES_DIR = Path(__file__).resolve().parent / "toygames"


@pytest.fixture
def toy_workspace(tiny_workspace):
    """tiny_workspace (cwd, tiny-random registered) whose game registry holds the toy games."""
    (tiny_workspace / "game_registry.json").write_text(
        json.dumps([{"benchmark_path": str(TOYGAMES_DIR)}]), encoding="utf-8")
    return tiny_workspace


@pytest.fixture(scope="session")
def tiny_pair(tiny_model_dir):
    """(model, tokenizer) of the tiny random Llama, loaded once."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    return AutoModelForCausalLM.from_pretrained(tiny_model_dir), AutoTokenizer.from_pretrained(tiny_model_dir)


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
