"""A supervised anchor inside online GRPO (``--sft-coef``).

GRPO learns only from what its rollouts happen to find: when the learner rarely samples a
good move (a taboo guess that follows the clue instead of a memorised word), its groups
carry little signal, and roles or games it does not reward drift out of their format. The
anchor adds, once per optimizer step, ``coef`` × the mean assistant-token loss of
``batch`` demonstration conversations (won episodes of the programmatic players on the
training instances, of the roles GRPO trains) to the step's gradients, one conversation
per forward and backward pass so that memory stays flat. Its loss goes to the run's log
as ``train/sft_loss`` and its time as ``time/sft_s``.
"""
from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Mapping, Optional, Sequence

from playpen.inference.logprobs import sequence_logprobs  # the vocabulary projection only at the turns' tokens
from playpen.training.sft.demonstrations import supervised_records, tokenized_dataset

SFT_MAX_LENGTH = 1024  # tokens per demonstration conversation (longer: cut, as in SFT)


class SFTAnchor:
    """``coef`` × the supervised loss of ``batch`` rows of ``rows`` (``input_ids`` and
    ``assistant_masks``, as :func:`playpen.training.sft.demonstrations.tokenized_dataset` makes them)
    added to the gradients of every optimizer step; the rows are used in turn."""

    def __init__(self, rows: Sequence[dict], coef: float, batch: int):
        if not rows:
            raise ValueError("SFTAnchor needs at least one demonstration row")
        self.rows = list(rows)
        self.coef, self.batch = float(coef), int(batch)
        self.cursor = 0
        self.done_for: Optional[int] = None
        self.metrics: dict[str, float] = {}

    def apply(self, trainer: Any, model: Any) -> bool:
        """Add the anchor's gradients for ``trainer``'s current optimizer step, once per step
        (the first micro-batch calls it; the others find it done). True when it ran."""
        step = int(trainer.state.global_step)
        if step == self.done_for:
            return False
        self.done_for = step
        began = time.perf_counter()
        total = 0.0
        for _ in range(self.batch):
            row = self.rows[self.cursor % len(self.rows)]
            self.cursor += 1
            loss = -sequence_logprobs(model, row["input_ids"], row["assistant_masks"]).mean()
            trainer.accelerator.backward(loss * (self.coef / self.batch))
            total += loss.item()
        self.metrics = {"train/sft_loss": total / self.batch}
        trainer.clock.add("sft", time.perf_counter() - began)  # a PlaypenGRPOTrainer's step clock
        return True


def demonstration_rows(games: Sequence[str], roles: Sequence[str], train_instances: str, out_dir: Path,
                       tokenizer: Any, seed: int, items: Optional[Mapping[str, Sequence[str]]] = None) -> list[dict]:
    """Tokenised won episodes of the programmatic players on the games' training instances
    (`items`: only those, a ``--split``), kept for ``roles`` (empty: all), played into
    ``out_dir/demonstrations`` once."""
    config = SimpleNamespace(games=",".join(games), dataset="", records="", demo_model="programmatic",
                             train_instances=train_instances, train_items=items, demo_max_instances=0,
                             roles=",".join(roles), outcomes="success")
    records = supervised_records(config, out_dir)
    dataset = tokenized_dataset(records, tokenizer, max_length=SFT_MAX_LENGTH, seed=seed)
    print(f"[playpen] --sft-coef: {len(dataset)} demonstration conversations", flush=True)
    return [dict(row) for row in dataset]
