"""Frozen past checkpoints of the learner as partners (``--partners ...,past:W``).

No second model: the learner's PEFT model gets a second LoRA adapter, ``past``, frozen
(no gradient, not in the optimizer), into which a snapshot of the trained adapter is
loaded. Snapshots (CPU copies of the adapter weights, a few MB) are taken every
``--past-every`` steps, the first before step 1 (the policy the run starts from); the last
:data:`KEEP` are kept, and each rollout call plays against one of them, picked by a
seeded random draw. The past partner generates like a local teacher, with ``past``
active for its own turns only; the learner's turns use the trained adapter. A resumed
run starts a new pool from the checkpoint it resumes.
"""
from __future__ import annotations

import random
from typing import Any, Optional

from playpen.rollouts.partners import HFTeacher

ADAPTER = "past"
KEEP = 4


class PastPolicies:
    """The pool of snapshots of one learner's adapter, and the partner that plays them."""

    def __init__(self, tokenizer: Any, name: str, sampling: Any, every: int, seed: int = 0,
                 keep: int = KEEP, source: str = "default"):
        self.tokenizer, self.name, self.sampling = tokenizer, name, sampling
        self.every, self.keep, self.seed, self.source = max(1, every), keep, seed, source
        self.pool: list[tuple[int, dict]] = []  # (step, adapter weights on the CPU)
        self.loaded: Optional[int] = None
        self.partner: Optional[PastPartner] = None

    def prepare(self, model: Any, step: int) -> "PastPartner":
        """Before the rollouts of ``step``: snapshot when due, load one snapshot into the
        ``past`` adapter of ``model`` (a PeftModel), and return the partner playing it."""
        from peft import get_peft_model_state_dict, set_peft_model_state_dict
        model = _peft_model(model)
        if ADAPTER not in model.peft_config:
            model.add_adapter(ADAPTER, model.peft_config[self.source])
            freeze(model)
        if not self.pool or step - self.pool[-1][0] >= self.every:
            weights = get_peft_model_state_dict(model, adapter_name=self.source)
            self.pool.append((step, {k: v.detach().to("cpu", copy=True) for k, v in weights.items()}))
            self.pool = self.pool[-self.keep:]
        picked, weights = random.Random(self.seed * 7919 + step).choice(self.pool)
        if picked != self.loaded:
            set_peft_model_state_dict(model, weights, adapter_name=ADAPTER)
            freeze(model)
            self.loaded = picked
        if self.partner is None:
            self.partner = PastPartner(model, self.tokenizer, f"{self.name}-past", self.sampling)
        self.partner.model = model
        self.partner.step = picked
        return self.partner


def freeze(model: Any) -> None:
    """The past adapter's weights take no gradient."""
    for name, param in model.named_parameters():
        if f".{ADAPTER}." in name:
            param.requires_grad_(False)


def _peft_model(model: Any):
    while not hasattr(model, "peft_config") and hasattr(model, "module"):
        model = model.module  # unwrap a DDP/accelerate wrapper
    if not hasattr(model, "peft_config"):
        raise TypeError("past partners need the learner as a PEFT (LoRA) model")
    return model


class PastPartner(HFTeacher):
    """A local teacher that is the learner with its ``past`` adapter active."""

    step: int = 0

    def respond(self, requests):
        previous = self.model.active_adapter
        self.model.set_adapter(ADAPTER)
        try:
            return super().respond(requests)
        finally:
            self.model.set_adapter(previous)
            freeze(self.model)
