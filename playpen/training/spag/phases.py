"""The SPAG run: imitation, then epochs of self-play → rewards → offline policy optimisation,
each phase an adapter checkpoint in ``<models_dir>/spag+lora/<learner>/`` (``imitation``,
``SPAG-1`` … ``SPAG-N``); the loss and data are in :mod:`playpen.training.spag`.

A phase folder counts when its ``trainer_state.json`` (written last) parses, as for the
TRL trainers' checkpoints. A phase stopped by Ctrl-C, SIGTERM or a callback saves
``partial/`` after the current step (the adapter, the optimizer state, the phase's step
and, in an epoch, its samples with their rewards and reference log-probabilities);
``--resume`` continues that phase there (no new self-play), else after the last complete
phase. A crash loses the phase it was in (it runs again). Every optimizer step is one line
of ``playpen-log.jsonl`` (global step, ``spag/phase``: 0 = imitation, k = epoch k) with
``memory/peak_rss_mb``.
"""
from __future__ import annotations

import random
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Optional

from playpen.callbacks import JsonlLogCallback
from playpen.errors import ResumeError
from playpen.files import write_json, write_text
from playpen.models import check_adapter
from playpen.rollouts import InstanceRef, Learner, SamplingConfig, rollout
from playpen.rollouts.chat import template_kwargs_of
from playpen.training.common.checkpoints import STATE_FILE, is_complete, remove_checkpoint
from playpen.training.common.final_evaluation import FinalEvaluation
from playpen.training.common.finite import NonFiniteGuard
from playpen.training.common.lifecycle import (GracefulInterrupt, lock_run_folder, model_of, safe_name,
                                               set_lora_dropout, tokenizer_of)
from playpen.training.common.memory import memory_metrics, prepare_for_training, release_memory, reset_peak
from playpen.training.common.plotting import CURVE_FILE, LOG_FILE, plot_run
from playpen.training.spag import objective

IMITATION = "imitation"
PARTIAL = "partial"


class SpagRun:
    """SPAG for ``playpen`` (a BasePlayPen whose config has SPAGOptions, DemonstrationOptions,
    LoraOptions and RunConfig). Created before anything is played or trained: locks the run
    folder and refuses ``--resume`` without a complete phase, a folder with phases without
    ``--resume``/``--overwrite``, and a final evaluation that would replace another run's."""

    kind = "spag+lora"

    def __init__(self, playpen):
        self.playpen, self.cfg = playpen, playpen.config
        cfg = self.cfg
        self.run_dir = Path(cfg.models_dir) / self.kind / safe_name(playpen.learner.name)
        self.phases = ([IMITATION] if cfg.imitation_steps else []) + [f"SPAG-{k}" for k in range(1, cfg.epochs + 1)]
        self.eval_name = f"{playpen.learner.name}+{self.kind}-{self.phases[-1]}"
        self.lock = lock_run_folder(self.run_dir)
        self.step = 0
        self.guard = NonFiniteGuard()  # steps with NaN/inf gradients never reach the weights
        self.partial: Optional[dict] = None  # the state of partial/ when --resume continues it
        try:
            self.done = self._refusals()
        except BaseException:
            self.lock.release()
            raise
        self.tokenizer = tokenizer_of(playpen.learner)
        self.template_kwargs = template_kwargs_of(playpen.learner)
        self.log = JsonlLogCallback(self.run_dir / LOG_FILE)
        self.interrupt = GracefulInterrupt()
        self.started = time.time()
        prepare_for_training()  # a fixed mmap threshold: freed tensors leave the process (benchmarks/memory.py)
        self.model = None  # the PeftModel being trained (set by the trainer)
        self.stopped = False  # a signal or a callback asked to stop
        self.summary: dict[str, Any] = {"phases": {}}

    def _refusals(self) -> list[str]:
        cfg = self.cfg
        existing = [p for p in self.run_dir.iterdir() if (p / STATE_FILE).exists()] if self.run_dir.is_dir() else []
        complete = [name for name in self.phases if is_complete(self.run_dir / name)]
        done = []
        for name in self.phases:  # phases count in order: a later one after a missing one does not
            if name not in complete:
                break
            done.append(name)
        partial = _read_state(self.run_dir / PARTIAL)
        upcoming = self.phases[len(done)] if len(done) < len(self.phases) else None
        if cfg.resume and partial is not None and partial.get("phase") == upcoming:
            self.partial = partial
        if cfg.resume and not done and self.partial is None:
            raise ResumeError(f"--resume: no complete phase in {self.run_dir} ({', '.join(self.phases)}); "
                              f"start without --resume")
        if existing and not cfg.resume and not cfg.overwrite:
            raise ResumeError(f"{self.run_dir} already holds checkpoints: pass --resume to continue, "
                              f"--overwrite to start over, or --models-dir DIR for a run of its own")
        self.final = FinalEvaluation(cfg, cfg.game_list, self.eval_name)
        if cfg.evaluate:  # refused now, not after training: another run's results, a bad set name
            self.final.check()
        if cfg.overwrite:
            for folder in existing:
                remove_checkpoint(folder)
            (self.run_dir / LOG_FILE).unlink(missing_ok=True)
            return []
        if done or self.partial:  # steps continue from where the run saved last; later log lines go
            self.step = int((self.partial or _read_state(self.run_dir / done[-1]) or {}).get("global_step", 0))
            _truncate_log(self.run_dir / LOG_FILE, self.step)
        return done

    # ------------------------------------------------------------------ the policy

    def policy(self):
        """The PeftModel to train: the last complete phase's adapter, --init-adapter, or a
        fresh adapter on the learner's model (peft injects it into that model in place, so
        the learner plays and is evaluated with it)."""
        from peft import PeftModel, get_peft_model
        base = model_of(self.playpen.learner)
        source = self.run_dir / (PARTIAL if self.partial else self.done[-1]) if self.partial or self.done \
            else self.cfg.init_adapter
        if source:
            model = PeftModel.from_pretrained(base, str(check_adapter(source)), is_trainable=True)
            set_lora_dropout(model, self.cfg.lora_dropout)  # the adapter's own dropout would blur the ratio
            return model
        return get_peft_model(base, self.cfg.lora_config())

    def save(self, model, name: str, metrics: dict) -> Path:
        folder = self.run_dir / name
        if folder.exists():
            remove_checkpoint(folder)
        model.save_pretrained(str(folder))
        self.tokenizer.save_pretrained(str(folder))
        write_json(folder / STATE_FILE, {"phase": name, "global_step": self.step, **metrics}, indent=1)
        if (self.run_dir / PARTIAL).exists():
            remove_checkpoint(self.run_dir / PARTIAL)
        self.summary["phases"][name] = metrics
        print(f"[playpen] {name}: {folder}", flush=True)
        return folder

    def save_partial(self, model, name: str, phase_step: int, optimizer, samples=None, collected=None) -> None:
        """A phase stopped after `phase_step` steps: what ``--resume`` needs to go on there."""
        import torch
        folder = self.run_dir / PARTIAL
        if folder.exists():
            remove_checkpoint(folder)
        model.save_pretrained(str(folder))
        torch.save(optimizer.state_dict(), folder / "optimizer.pt")
        if samples is not None:
            torch.save([(s.ids, s.mask, s.role, s.reward, None if s.ref_logps is None else s.ref_logps.cpu())
                        for s in samples], folder / "samples.pt")
        write_json(folder / STATE_FILE, {"phase": name, "phase_step": phase_step, "global_step": self.step,
                                         "collected": collected or {}}, indent=1)
        print(f"[playpen] {name} stopped after step {phase_step}: {folder}", flush=True)

    def resumed(self, name: str, optimizer) -> int:
        """The steps of phase `name` done before (0 unless --resume continues it); loads its optimizer state."""
        if not self.partial or self.partial.get("phase") != name:
            return 0
        import torch
        optimizer.load_state_dict(torch.load(self.run_dir / PARTIAL / "optimizer.pt"))
        print(f"[playpen] {name}: resumed after step {self.partial['phase_step']}", flush=True)
        return int(self.partial["phase_step"])

    def partial_samples(self, name: str) -> Optional[tuple[list, dict]]:
        """The samples and metrics of epoch `name` saved when it stopped (None: collect them)."""
        if not self.partial or self.partial.get("phase") != name:
            return None
        import torch
        rows = torch.load(self.run_dir / PARTIAL / "samples.pt")
        samples = [objective.Sample(ids, mask, role, reward, ref) for ids, mask, role, reward, ref in rows]
        return samples, dict(self.partial.get("collected") or {})

    # ------------------------------------------------------------------ steps

    @staticmethod
    def _begin_step() -> None:
        """What a step frees goes back to the system; ``memory/peak_rss_mb`` is then the step's own."""
        release_memory()
        reset_peak()

    def _step(self, phase: int, metrics: dict) -> bool:
        """Log one optimizer step; False when the run must stop (signal or callback)."""
        self.step += 1
        metrics = {**metrics, "spag/phase": phase, **memory_metrics(), **self.guard.metrics()}
        keep_going = self.playpen.callbacks.on_train_step(self.step, metrics)
        self.log.on_train_step(self.step, metrics)
        self.stopped = self.stopped or not keep_going or self.interrupt.requested or self.guard.stop
        return not self.stopped

    def imitate(self, model, rows: list, steps: int) -> bool:
        """Imitation: SFT + KL to the adapter-free model on `rows` (ids, mask). False when stopped."""
        import torch
        cfg, rng = self.cfg, random.Random(self.playpen.seed)
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.learning_rate)
        order: list[int] = []
        model.train()
        for k in range(self.resumed(IMITATION, optimizer), steps):
            self._begin_step()
            batch = _next_batch(order, len(rows), cfg.batch_size * cfg.gradient_accumulation_steps, rng)
            optimizer.zero_grad()
            nll = kl = 0.0
            for i in batch:
                loss, info = objective.imitation_loss(model, *rows[i], cfg.imitation_kl)
                (loss / len(batch)).backward()
                nll, kl = nll + info["nll"] / len(batch), kl + info["kl"] / len(batch)
            self.guard.check(model, self.step + 1)  # NaN/inf gradients: dropped, the weights stay
            optimizer.step()
            if not self._step(0, {"train/loss": nll + cfg.imitation_kl * kl, "train/nll": nll, "train/kl": kl}) \
                    and k + 1 < steps:
                self.save_partial(model, IMITATION, k + 1, optimizer)
                return False
        model.eval()
        return True

    def collect(self, model, epoch: int, instances: list) -> tuple[list, dict]:
        """Self-play episodes of `epoch` with `model` in every role; samples with their rewards
        and the reference log-probabilities, and the collection's metrics."""
        import torch
        cfg, playpen = self.cfg, self.playpen
        sampling = SamplingConfig.from_gen_args(getattr(playpen.learner, "gen_args", None))
        sampling = replace(sampling, temperature=sampling.temperature or 1.0)
        rng = random.Random(playpen.seed * 7919 + epoch)
        chosen = [InstanceRef(*i) for i in rng.sample(instances, min(cfg.episodes_per_epoch, len(instances)))]
        reward = objective.RoleOutcomeReward(cfg.win_reward, cfg.tie_reward, cfg.lose_reward, cfg.abort_reward)
        model.eval()
        result = rollout(sorted({i.game for i in chosen}), Learner(model, self.tokenizer, playpen.learner.name,
                                                                   sampling, self.template_kwargs),
                         instances=chosen, instances_file=cfg.train_instances, reward_fn=reward,
                         max_concurrent_episodes=cfg.max_concurrent_episodes,
                         records_dir=playpen.output_dir / self.kind / safe_name(playpen.learner.name),
                         callbacks=playpen.callbacks, seed=playpen.seed * 100003 + epoch)
        samples = objective.episode_samples(result.episodes, cfg.win_reward, cfg.winners_only)
        for s in samples:
            s.ids, s.mask = s.ids[:cfg.max_length], s.mask[:cfg.max_length]
        samples = [s for s in samples if any(s.mask[1:])]
        with torch.no_grad():
            for s in samples:
                if cfg.spag_reference == "base":
                    with model.disable_adapter():
                        s.ref_logps = objective.token_logps(model, s.ids, s.mask)
                else:
                    s.ref_logps = objective.token_logps(model, s.ids, s.mask)
        return samples, _rollout_metrics(result.episodes, samples, cfg.win_reward)

    def optimise(self, model, epoch: int, samples: list, imitation_rows: list, collected: dict) -> bool:
        """``--max-steps`` steps of the clipped, role-weighted offline policy loss (plus
        ``--sft-coef`` × SFT on the imitation data). False when stopped."""
        import torch
        cfg, rng = self.cfg, random.Random(self.playpen.seed * 31 + epoch)
        weights = objective.role_weights([s.role for s in samples]) if cfg.role_balance else [1.0] * len(samples)
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.learning_rate)
        order: list[int] = []
        sft_order: list[int] = []
        model.train()
        for k in range(self.resumed(f"SPAG-{epoch}", optimizer), cfg.max_steps):
            self._begin_step()
            batch = _next_batch(order, len(samples), cfg.batch_size * cfg.gradient_accumulation_steps, rng)
            optimizer.zero_grad()
            sums = {"loss": 0.0, "kl": 0.0, "advantage": 0.0, "clipped": 0.0, "sft": 0.0}
            for i in batch:
                s = samples[i]
                loss, info = objective.spag_sample_loss(objective.token_logps(model, s.ids, s.mask), s.ref_logps, s.reward,
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
            self.guard.check(model, self.step + 1)
            optimizer.step()
            metrics = {"train/loss": sums["loss"] + cfg.sft_coef * sums["sft"], "train/kl": sums["kl"],
                       "spag/advantage_mean": sums["advantage"], "spag/clipped_fraction": sums["clipped"],
                       **({"train/sft_loss": sums["sft"]} if cfg.sft_coef else {}), **collected}
            if not self._step(epoch, metrics) and k + 1 < cfg.max_steps:
                self.save_partial(model, f"SPAG-{epoch}", k + 1, optimizer, samples, collected)
                return False
        model.eval()
        return True

    # ------------------------------------------------------------------ the end

    def finish(self, model, players: Optional[list] = None) -> dict:
        """Evaluate the last phase's adapter before -> after (unless --no-evaluate or stopped
        early; :mod:`~playpen.training.common.final_evaluation`), write ``playpen-run.json`` and the curve; release the lock."""
        try:
            playpen, cfg = self.playpen, self.cfg
            last = [name for name in self.phases if is_complete(self.run_dir / name)]
            checkpoint = self.run_dir / last[-1] if last else None
            complete = bool(last) and last[-1] == self.phases[-1]
            if not complete and _read_state(self.run_dir / PARTIAL) is not None:
                checkpoint = self.run_dir / PARTIAL  # stopped inside a phase: its adapter is the latest
            summary = {"trainer": playpen.name, "learner": playpen.learner.name, "config": asdict(cfg),
                       "checkpoint": str(checkpoint), **self.summary,
                       "train_seconds": round(time.time() - self.started, 1),
                       "interrupted": self.interrupt.requested, "stopped": not complete}
            if self.interrupt.requested:
                playpen.interrupted_by = self.interrupt.signum
            if cfg.evaluate and complete and not self.interrupt.requested:
                model.eval()
                summary.update(self.final.run(players or [playpen.learner], playpen.learner))
            write_json(self.run_dir / "playpen-run.json", summary, indent=1)
            if (self.run_dir / LOG_FILE).exists():
                plot_run(self.run_dir)
            print(f"[playpen] adapter: {checkpoint}  curve: {self.run_dir / CURVE_FILE}", flush=True)
            if not complete:
                print(f"[playpen] stopped before {self.phases[len(last)]}: continue with --resume", flush=True)
            return summary
        finally:
            self.lock.release()


def _read_state(folder: Path) -> Optional[dict]:
    """A complete checkpoint's ``trainer_state.json`` (None: missing or cut short)."""
    import json
    if not is_complete(folder):
        return None
    return json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))


def _truncate_log(path: Path, step: int) -> None:
    """Drop the log's train steps after `step` (a phase cut short runs again)."""
    import json

    if not path.exists():
        return
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = []
    for line in lines:
        try:
            if json.loads(line).get("step", 0) <= step:
                kept.append(line)
        except ValueError:  # a line cut short by a kill
            continue
    if len(kept) != len(lines):
        write_text(path, "".join(kept))


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
