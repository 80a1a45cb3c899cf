"""The SPAG run: imitation, then epochs of self-play → rewards → offline policy optimisation,
inside playpen's training lifecycle (:class:`~playpen.training.common.lifecycle.TrainingRun`:
the run folder's lock, refusals, Ctrl-C/SIGTERM, ``--resume``, the final evaluation); the
loss and data are in :mod:`playpen.training.spag.objective`.

The phases (``imitation``, ``SPAG-1`` … ``SPAG-N``) number their optimizer steps as one run:
imitation takes steps 1 … ``--imitation-steps``, each epoch the next ``--max-steps``. Each
phase ends with a checkpoint ``checkpoint-N`` in ``<models_dir>/spag+lora/<learner>/`` (the
adapter, ``optimizer.pt``, ``trainer_state.json`` written last, naming the phase); a phase
stopped by Ctrl-C, SIGTERM or a callback saves one after the current step, with, in an epoch,
its samples, rewards and reference log-probabilities (``samples.pt``), and ``--resume``
continues that phase there without new self-play. A crash loses the phase it was in (it runs
again). One AdamW state and one learning-rate schedule run through all phases
(:class:`~playpen.training.common.optimization.Optimization`: ``--max-grad-norm``,
``--lr-scheduler-type``, the non-finite guard). Every optimizer step is one line of
``playpen-log.jsonl`` (``spag/phase``: 0 = imitation, k = epoch k). One process: SPAG's
self-play is not shared out over ranks.
"""
from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path
from typing import Optional

from playpen.errors import ResumeError
from playpen.models import load_init_adapter
from playpen.rollouts import InstanceRef, Learner, SamplingConfig, rollout
from playpen.rollouts.chat import template_kwargs_of
from playpen.training.common.checkpoints import checkpoints, read_state, remove_checkpoint, write_state
from playpen.peft_internals import set_lora_dropout
from playpen.training.common.lifecycle import TrainingRun, model_of, safe_name, tokenizer_of
from playpen.inference.logprobs import sequence_logprobs
from playpen.training.common.optimization import Optimization
from playpen.training.spag import objective

IMITATION = "imitation"
SAMPLES_FILE = "samples.pt"


class SpagRun:
    """SPAG for ``trainer`` (a BasePlayPen whose config has SPAGOptions, DemonstrationOptions,
    LoraOptions, OptimizerOptions and RunConfig). Created before anything is played or
    trained: its :class:`TrainingRun` locks the run folder and refuses what it refuses."""

    kind = "spag+lora"

    def __init__(self, trainer):
        self.trainer, self.cfg = trainer, trainer.config
        cfg = self.cfg
        self.run_dir = Path(cfg.models_dir) / self.kind / safe_name(trainer.learner.name)
        self.phases = ([(IMITATION, cfg.imitation_steps)] if cfg.imitation_steps else []) + \
            [(f"SPAG-{k}", cfg.max_steps) for k in range(1, cfg.epochs + 1)]
        self.total_steps = sum(steps for _, steps in self.phases)
        self.run = TrainingRun(trainer, self.run_dir, cfg.game_list, eval_prefix=f"{trainer.learner.name}+{self.kind}-",
                               total_steps=self.total_steps)
        try:
            self.tokenizer = tokenizer_of(trainer.learner)
            self.template_kwargs = template_kwargs_of(trainer.learner)
        except BaseException:
            self.run.lock.release()
            raise
        self.step = 0
        self.model = None  # the PeftModel being trained
        self.stopped = False  # a signal or a callback asked to stop
        self.complete = False  # every phase done
        self.phase_metrics: dict[str, dict] = {}

    # ------------------------------------------------------------------ where a resumed run goes on

    def position(self, resume_from: Optional[Path]) -> tuple[int, int, dict]:
        """(the phase to run, its steps done, the checkpoint's state) of a run resumed from
        `resume_from`; (0, 0, {}) for a new run."""
        if resume_from is None:
            return 0, 0, {}
        state = read_state(resume_from)
        names = [name for name, _ in self.phases]
        if state.get("phase") not in names:
            raise ResumeError(f"--resume: {resume_from} is of phase {state.get('phase')!r}, not one of this run's "
                              f"({', '.join(names)}): pass the options of the run it continues")
        index, done = names.index(state["phase"]), int(state["phase_step"])
        self.step, self.phase_metrics = int(state["global_step"]), dict(state.get("phases") or {})
        if done >= self.phases[index][1]:
            return index + 1, 0, state
        return index, done, state

    def policy(self, resume_from: Optional[Path]):
        """The PeftModel to train: the checkpoint's adapter, --init-adapter, or a fresh adapter
        on the learner's model (peft injects it into that model in place, so the learner plays
        and is evaluated with it)."""
        from peft import get_peft_model
        base = model_of(self.trainer.learner)
        source = str(resume_from) if resume_from is not None else self.cfg.init_adapter
        if source:
            model = load_init_adapter(base, source)
            set_lora_dropout(model, self.cfg.lora_dropout)  # the adapter's own dropout would blur the ratio
            return model
        return get_peft_model(base, self.cfg.lora_config())

    def optimization(self, model, resume_from: Optional[Path]) -> Optimization:
        """One optimizer and schedule for every phase; a resumed run's state loaded."""
        optimization = Optimization([p for p in model.parameters() if p.requires_grad], self.cfg.learning_rate,
                                    self.total_steps, self.cfg, guard=self.run.guard)
        if resume_from is not None:
            optimization.load(resume_from)
        return optimization

    def saved_samples(self, resume_from: Path) -> list:
        """The samples of the epoch `resume_from` stopped in."""
        import torch
        rows = torch.load(resume_from / SAMPLES_FILE)
        return [objective.Sample(ids, mask, role, reward, ref) for ids, mask, role, reward, ref in rows]

    # ------------------------------------------------------------------ checkpoints

    def save(self, model, optimization: Optimization, name: str, phase_step: int, metrics: dict,
             samples: Optional[list] = None) -> Path:
        """``checkpoint-<step>`` of phase `name` after `phase_step` of its steps; a complete
        phase's checkpoint replaces those its stops left."""
        import torch
        folder = self.run_dir / f"checkpoint-{self.step}"
        if folder.exists():
            remove_checkpoint(folder)
        model.save_pretrained(str(folder))
        self.tokenizer.save_pretrained(str(folder))
        optimization.save(folder)
        if samples is not None:
            torch.save([(s.ids, s.mask, s.role, s.reward, None if s.ref_logps is None else s.ref_logps.cpu())
                        for s in samples], folder / SAMPLES_FILE)
        steps = dict(self.phases)[name]
        if phase_step >= steps:
            self.phase_metrics[name] = {**metrics, "checkpoint": folder.name}
        write_state(folder, {"global_step": self.step, "phase": name, "phase_step": phase_step,
                             "phase_steps": steps, "metrics": metrics, "phases": self.phase_metrics})
        if phase_step >= steps:  # the stops inside this phase are behind it now
            for earlier in checkpoints(self.run_dir):
                state = read_state(earlier)
                if earlier != folder and state.get("phase_step", 0) < state.get("phase_steps", 0):
                    remove_checkpoint(earlier)
            print(f"[playpen] {name}: {folder}", flush=True)
        else:
            print(f"[playpen] {name} stopped after step {phase_step}: {folder}", flush=True)
        return folder

    # ------------------------------------------------------------------ steps

    def _step(self, phase: int, metrics: dict) -> bool:
        """Log one optimizer step; False when the run must stop (signal, callback, guard)."""
        self.step += 1
        keep_going = self.run.log_step(self.step, {**metrics, "spag/phase": phase})
        self.stopped = self.stopped or not keep_going
        return not self.stopped

    def imitate(self, model, optimization: Optimization, rows: list, first: int) -> bool:
        """Imitation from its step `first`: SFT + KL to the adapter-free model on `rows` (ids,
        mask). False when stopped inside it (its checkpoint saved)."""
        cfg, rng = self.cfg, random.Random(self.trainer.seed)
        steps = dict(self.phases)[IMITATION]
        order: list[int] = []
        model.train()
        for k in range(first, steps):
            self.run.begin_step()
            batch = _next_batch(order, len(rows), cfg.batch_size * cfg.gradient_accumulation_steps, rng)
            nll = kl = 0.0
            for i in batch:
                loss, info = objective.imitation_loss(model, *rows[i], cfg.imitation_kl)
                (loss / len(batch)).backward()
                nll, kl = nll + info["nll"] / len(batch), kl + info["kl"] / len(batch)
            step = optimization.step(model, self.step + 1)
            metrics = {"train/loss": nll + cfg.imitation_kl * kl, "train/nll": nll, "train/kl": kl, **step}
            if not self._step(0, metrics) and k + 1 < steps:
                self.save(model, optimization, IMITATION, k + 1, {})
                return False
        model.eval()
        return True

    def collect(self, model, epoch: int, instances: list) -> tuple[list, dict]:
        """Self-play episodes of `epoch` with `model` in every role; samples with their rewards
        and the reference log-probabilities, and the collection's metrics."""
        import torch
        cfg, trainer = self.cfg, self.trainer
        sampling = SamplingConfig.from_gen_args(getattr(trainer.learner, "gen_args", None))
        sampling = replace(sampling, temperature=sampling.temperature or 1.0)
        rng = random.Random(trainer.seed * 7919 + epoch)
        chosen = [InstanceRef(*i) for i in rng.sample(instances, min(cfg.episodes_per_epoch, len(instances)))]
        reward = objective.RoleOutcomeReward(cfg.win_reward, cfg.tie_reward, cfg.lose_reward, cfg.abort_reward)
        model.eval()
        result = rollout(sorted({i.game for i in chosen}), Learner(model, self.tokenizer, trainer.learner.name,
                                                                   sampling, self.template_kwargs),
                         instances=chosen, instances_file=cfg.train_instances, reward_fn=reward,
                         max_concurrent_episodes=cfg.max_concurrent_episodes,
                         records_dir=trainer.output_dir / self.kind / safe_name(trainer.learner.name),
                         callbacks=trainer.callbacks, seed=trainer.seed * 100003 + epoch)
        samples = objective.episode_samples(result.episodes, cfg.win_reward, cfg.winners_only)
        for s in samples:
            s.ids, s.mask = s.ids[:cfg.max_length], s.mask[:cfg.max_length]
        samples = [s for s in samples if any(s.mask[1:])]
        with torch.no_grad():
            for s in samples:
                if cfg.spag_reference == "base":
                    with model.disable_adapter():
                        s.ref_logps = sequence_logprobs(model, s.ids, s.mask)
                else:
                    s.ref_logps = sequence_logprobs(model, s.ids, s.mask)
        return samples, _rollout_metrics(result.episodes, samples, cfg.win_reward)

    def optimise(self, model, optimization: Optimization, epoch: int, first: int, samples: list,
                 imitation_rows: list, collected: dict) -> bool:
        """Epoch `epoch` from its step `first`: ``--max-steps`` steps of the clipped,
        role-weighted offline policy loss (plus ``--sft-coef`` × SFT on the imitation data).
        False when stopped inside it (its checkpoint saved, with the samples)."""
        cfg, rng = self.cfg, random.Random(self.trainer.seed * 31 + epoch)
        weights = objective.role_weights([s.role for s in samples]) if cfg.role_balance else [1.0] * len(samples)
        order: list[int] = []
        sft_order: list[int] = []
        model.train()
        for k in range(first, cfg.max_steps):
            self.run.begin_step()
            batch = _next_batch(order, len(samples), cfg.batch_size * cfg.gradient_accumulation_steps, rng)
            sums = {"loss": 0.0, "kl": 0.0, "advantage": 0.0, "clipped": 0.0, "sft": 0.0}
            for i in batch:
                s = samples[i]
                loss, info = objective.spag_sample_loss(sequence_logprobs(model, s.ids, s.mask), s.ref_logps, s.reward,
                                                        cfg.beta, cfg.clip)
                (weights[i] * loss / len(batch)).backward()
                sums["loss"] += weights[i] * loss.item() / len(batch)
                for key in ("kl", "advantage", "clipped"):
                    sums[key] += info[key] / len(batch)
            if cfg.sft_coef and imitation_rows:
                rows = _next_batch(sft_order, len(imitation_rows), len(batch), rng)
                for j in rows:
                    nll, _ = objective.imitation_loss(model, *imitation_rows[j], 0.0)
                    (cfg.sft_coef * nll / len(rows)).backward()
                    sums["sft"] += nll.item() / len(rows)
            step = optimization.step(model, self.step + 1)
            metrics = {"train/loss": sums["loss"] + cfg.sft_coef * sums["sft"], "train/kl": sums["kl"],
                       "spag/advantage_mean": sums["advantage"], "spag/clipped_fraction": sums["clipped"],
                       **({"train/sft_loss": sums["sft"]} if cfg.sft_coef else {}), **collected, **step}
            if not self._step(epoch, metrics) and k + 1 < cfg.max_steps:
                self.save(model, optimization, f"SPAG-{epoch}", k + 1, collected, samples)
                return False
        model.eval()
        return True


def _next_batch(order: list[int], n: int, size: int, rng: random.Random) -> list[int]:
    """The next `size` indices of a shuffled pass over range(n), reshuffled when used up."""
    batch = []
    while len(batch) < min(size, n):
        if not order:
            order.extend(rng.sample(range(n), n))
        batch.append(order.pop(0))
    return batch


def _rollout_metrics(episodes, samples, win_reward: float) -> dict[str, float]:
    played = [e for e in episodes if e.outcome in ("success", "failure")]
    out = {"rollout/episodes": len(episodes),
           "rollout/percent_played": 100.0 * len(played) / max(1, len(episodes)),
           "spag/samples": len(samples)}
    by_role: dict[str, list[float]] = {}
    for e in episodes:
        for t in e.trajectories:
            if t.side_call is None and t.reward == t.reward:
                by_role.setdefault(t.role, []).append(t.reward)
    for role, rewards in by_role.items():
        out[f"reward/{role}/mean"] = sum(rewards) / len(rewards)
        out[f"spag/win_rate/{role}"] = sum(r == win_reward for r in rewards) / len(rewards)
        out[f"spag/samples/{role}"] = sum(s.role == role for s in samples)
    return out
