"""Helpers of the rollout tests (plain functions; the fixtures are in conftest.py)."""
import math
from pathlib import Path

TOYGAMES_DIR = Path(__file__).resolve().parent / "toygames"


def make_learner(tiny_pair, temperature=1.0, max_new_tokens=6, name="tiny-random"):
    from playpen.rollouts import Learner, SamplingConfig
    model, tokenizer = tiny_pair
    return Learner(model, tokenizer, name, SamplingConfig(temperature=temperature, max_new_tokens=max_new_tokens))


class GenerateSpy:
    """Wraps playpen.inference.engine.generate and records the batch size of every call."""

    def __init__(self, monkeypatch):
        from playpen.inference import engine
        self.batch_sizes = []
        original = engine.generate

        def spy(model, tokenizer, prompts, sampling, *args, **kwargs):
            self.batch_sizes.append(len(prompts))
            return original(model, tokenizer, prompts, sampling, *args, **kwargs)

        monkeypatch.setattr(engine, "generate", spy)


# sayword's all-"yes" instances ask for this word; tiny-yesno (conftest.yesno_model_dir) half-learnt it
PROMPT = "Reply with the single word: yes"


def p_yes(model, tokenizer) -> float:
    """The policy's exact probability of answering "yes<|im_end|>" after PROMPT: the WordSayer's
    expected binary reward on the all-"yes" sayword instances (noise-free)."""
    import torch
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": PROMPT}], add_generation_prompt=True,
                                           tokenize=False)
    start = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    ids = tokenizer(prompt + "yes<|im_end|>", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logprobs = model(torch.tensor([ids])).logits[0].log_softmax(-1)
    return math.exp(sum(logprobs[i - 1, ids[i]].item() for i in range(start, len(ids))))
