"""Early stopping on a dev split: a run that plays its games' dev items every ``--dev-every``
steps, keeps the checkpoint with the best dev mean and stops after ``--dev-patience`` chunks
without a better one.

A fixed number of steps over- or under-trains, and choosing it by the numbers reported at
the end spends the held-out set on tuning. The dev items come from a splits file
(:mod:`playpen.evaluation.splits`, the file ``playpen eval --split`` reads), so the test items
stay unplayed until the method is fixed. Each dev evaluation is ``playpen eval``'s
(:func:`playpen.evaluation.evaluate`) with the learner as trained so far, decoding greedily;
its episodes land in ``<results_dir>/<prefix>dev-checkpoint-N/`` and its scores (Main Score,
aborted = 0, per game and per item) in ``playpen-log.jsonl`` as ``"event": "dev"`` rows. At
the end the best chunk's weights go back into the model, so the final evaluation, the
summary's ``checkpoint`` and ``playpen register`` are the best chunk's
(``best_checkpoint`` in ``playpen-run.json``).

:class:`~playpen.training.common.lifecycle.TrainingRun` drives it: the trainer callback asks
for a save at each chunk's end and calls :meth:`DevStopping.measure` after it; rotation never
removes the best checkpoint.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from playpen import distributed
from playpen.callbacks import JsonlLogCallback
from playpen.errors import TrainingSetupError
from playpen.evaluation import evaluate
from playpen.evaluation.compare import item_scores
from playpen.evaluation.splits import split_items
from playpen.training.common.checkpoints import checkpoint_step
from playpen.training.common.final_evaluation import greedy
from playpen.training.common.plotting import LOG_FILE


def dev_items(cfg: Any) -> tuple[dict[str, list[str]], Optional[str]]:
    """(game -> its dev items, the instances file they are ids of) of a config with
    ``--dev-every``; one line for a splits file that does not split its games."""
    return split_items(cfg.dev_splits, "dev", cfg.game_list)


@dataclass
class BestSoFar:
    """The stopping rule over the chunks' dev means: a chunk is better only when it beats the
    best so far (a tie keeps the earlier, shorter-trained one); `patience` chunks in a row
    without a better one stop the run (0: never)."""

    patience: int
    best_step: Optional[int] = None
    best_score: float = -math.inf
    since: int = 0
    curve: list = field(default_factory=list)

    def add(self, step: int, score: float) -> bool:
        """Record chunk `step`'s dev mean; True when the run should stop now."""
        self.curve.append({"step": step, "dev": score})
        if score > self.best_score + 1e-9:
            self.best_step, self.best_score, self.since = step, score, 0
        else:
            self.since += 1
        return bool(self.patience) and self.since >= self.patience


class DevStopping:
    """The dev evaluations of one run (see the module docstring). `cfg` has ``dev_every``,
    ``dev_patience``, ``dev_splits``, ``game_list``, ``results_dir`` and ``eval_batch_size``;
    `learner` is the model being trained (it carries the weights as they are); dev folders are
    named ``<prefix>dev-checkpoint-N``. `resume_from`: the checkpoint a resumed run continues
    from; the dev rows logged up to its step count again."""

    def __init__(self, cfg: Any, learner: Any, run_dir: Path, prefix: str, resume_from: Optional[str] = None):
        if distributed.world_size() > 1:
            raise TrainingSetupError("--dev-every runs on one process (the dev games are played by one): "
                                     "run it without --num-processes or accelerate launch")
        self.every, self.learner, self.run_dir, self.prefix = cfg.dev_every, learner, Path(run_dir), prefix
        self.results_dir, self.batch_size = cfg.results_dir, cfg.eval_batch_size
        self.items, self.instances = dev_items(cfg)
        self.rule = BestSoFar(cfg.dev_patience)
        self.log = JsonlLogCallback(self.run_dir / LOG_FILE)
        if resume_from is not None:
            self._replay(checkpoint_step(resume_from))

    def _replay(self, step: int) -> None:
        """The rule as it stood at `step`: the logged dev rows up to it, in order (the last of a step wins)."""
        rows: dict[int, float] = {}
        path = self.log.path
        for line in path.read_text(encoding="utf-8").splitlines() if path.exists() else []:
            try:
                row = json.loads(line)
            except ValueError:  # a line cut short by a kill
                continue
            if row.get("event") == "dev" and row.get("step", math.inf) <= step:
                rows[row["step"]] = row["dev/score"]
        for done in sorted(rows):
            self.rule.add(done, rows[done])

    def due(self, step: int, max_steps: int) -> bool:
        """Chunk boundaries: every ``dev_every`` steps and the last step."""
        return step > 0 and (step % self.every == 0 or step >= max_steps)

    def measure(self, step: int) -> bool:
        """Play the dev items with the model as it is at `step` (its checkpoint just saved), log
        the scores; True when the run should stop."""
        model = getattr(self.learner, "model", self.learner)
        training = model.training
        model.eval()
        try:
            with greedy([self.learner]):
                table = evaluate([self.learner], list(self.items), results_dir=self.results_dir,
                                 instances=self.instances, items=self.items, batch_size=self.batch_size,
                                 run_name=f"{self.prefix}dev-checkpoint-{step}", overwrite=True)
        finally:
            model.train(training)
        scores = item_scores(table.run_dir)
        pooled = [v for game in scores.values() for v in game.values()]
        score = sum(pooled) / len(pooled) if pooled else 0.0
        stop = self.rule.add(step, score)
        row = {"dev/score": score, "dev/best_step": self.rule.best_step, "dev/since_best": self.rule.since}
        for game, items in scores.items():
            row[f"dev/{game}/score"] = sum(items.values()) / len(items)
            row[f"dev/{game}/items"] = items
        self.log.write_event("dev", step=step, **row)
        print(f"[playpen] dev at step {step}: {score:.2f} over {len(pooled)} items (best {self.rule.best_score:.2f} "
              f"at step {self.rule.best_step})" + (f"; {self.rule.since} without a better one: stopping" * stop),
              flush=True)
        return stop

    @property
    def best_checkpoint(self) -> Optional[Path]:
        return None if self.rule.best_step is None else self.run_dir / f"checkpoint-{self.rule.best_step}"

    def restore(self, model: Any, last: Optional[Path]) -> Optional[Path]:
        """Put the best checkpoint's weights into `model` (the trainer's: a PeftModel or the whole
        model) unless `last` is that checkpoint; returns the best checkpoint (None: no dev chunk)."""
        best = self.best_checkpoint
        if best is None or (last is not None and Path(last) == best):
            return best
        if (best / "adapter_model.safetensors").exists():
            from peft import load_peft_weights, set_peft_model_state_dict
            result = set_peft_model_state_dict(model, load_peft_weights(str(best)))
            unexpected = list(getattr(result, "unexpected_keys", []) or [])
        else:
            from safetensors.torch import load_file
            unexpected = []
            shards = sorted(best.glob("model*.safetensors"))
            if not shards:
                raise FileNotFoundError(f"{best}: no adapter_model.safetensors or model*.safetensors to restore")
            for shard in shards:
                unexpected += model.load_state_dict(load_file(shard), strict=False).unexpected_keys
        if unexpected:
            raise RuntimeError(f"{best}: weights the model does not have: {unexpected[:5]}")
        print(f"[playpen] the best dev chunk is {best.name} (dev {self.rule.best_score:.2f}): its weights are "
              f"the run's result", flush=True)
        return best

    def summary(self) -> dict:
        """What ``playpen-run.json`` gets: the best checkpoint and the dev curve."""
        best = self.best_checkpoint
        return {"best_checkpoint": str(best) if best else None, "dev_best": self.rule.best_score,
                "dev_curve": list(self.rule.curve)}
