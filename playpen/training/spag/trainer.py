"""SPAG with LoRA on adversarial_taboo (``playpen run spag``): imitation with a KL term, then
epochs of self-play and offline policy optimisation; the phase loop of the run
(:class:`~playpen.training.spag.phases.SpagRun` holds each phase's steps and checkpoints,
inside playpen's one training lifecycle). :class:`SPAGTrainer`'s docstring is its
documentation (``playpen run spag --help``).
"""
from __future__ import annotations

from dataclasses import dataclass

from playpen.errors import DatasetError
from playpen.training.common.base import BasePlayPen
from playpen.training.common.config import DemonstrationOptions, LoraOptions, RunConfig, option
from playpen.training.common.optimization import OptimizerOptions
from playpen.training.grpo.rollout_bridge import training_slots
from playpen.training.preference.rounds import check_init_adapter
from playpen.training.spag import objective
from playpen.training.spag.phases import IMITATION, SpagRun


@dataclass
class SPAGConfig(objective.SPAGOptions, DemonstrationOptions, LoraOptions, OptimizerOptions, RunConfig):
    """Every option is shared: SPAG's phases, the demonstrations, LoRA, the optimizer step and the run."""

    lora_dropout: float = option(0.0, "LoRA dropout (0: the trained policy is the one that played)")
    batch_size: int = option(4, "samples per optimizer step")
    lr_scheduler_type: str = option("constant", "learning-rate schedule over all phases' steps: linear, cosine, "
                                                "constant, constant_with_warmup")

    def validate(self) -> None:
        super().validate()
        self.check_optimizer_options()


class SPAGTrainer(BasePlayPen):
    """SPAG with LoRA: imitation with KL, then self-play epochs of offline policy optimisation.

        playpen run spag -l smol-135m -T 1.0 -L 40 --epochs 2 --episodes-per-epoch 32
        playpen run spag -l smol-135m -t programmatic --imitation-steps 0 \\
            --init-adapter models/sft+lora/smol-135m/checkpoint-8     # evaluated against -t
        playpen run spag -l smol-135m --epochs 3 --resume             # after a run of 2: SPAG-3 only

    Cheng et al., "Self-playing Adversarial Language Game Enhances LLM Reasoning", on
    ``adversarial_taboo`` (playpen/games/builtin/taboo/README.md). Two phases, their steps
    numbered as one run:

    1. Imitation (``--imitation-steps``; 0 skips it): the SFT loss on demonstrations (as for
       ``playpen run sft``; each role's turns only from episodes it won, ``--imitate-winners``,
       read from the episodes' ``<Role> Win`` keys) plus ``--imitation-kl`` x KL(policy ||
       reference) over the vocabulary, the reference being the model with the adapter disabled.
    2. ``--epochs`` epochs (phases ``SPAG-1`` ... ``SPAG-N``): the learner plays both roles on
       ``--episodes-per-epoch`` sampled training instances (``-T``, 0 means 1.0); each side of
       an episode is one sample rewarded by its role's outcome (``--win-reward``,
       ``--tie-reward``, ``--lose-reward``; ``--abort-reward`` for the role that broke the
       format, the tie reward for the other). ``--max-steps`` steps of ``--batch-size``
       samples minimise per sample ``-mean_t min(rho_t A, clip(rho_t, 1 - eps, 1 + eps) A)``,
       rho_t = pi/pi_ref (``--clip`` eps), A = r - ``--beta`` x KL (the sample's mean
       log-ratio, no gradient); pi_ref's log-probabilities are computed once as the epoch
       starts, by the policy that played it (``--spag-reference behaviour``) or the base
       (``base``). Only winners' samples by default (``--no-winners-only`` keeps all), every
       role weighing half (``--role-balance``: weight N / (roles x samples of its role));
       ``--sft-coef`` adds that weight x the SFT loss on the imitation data. An epoch without a
       sample keeps the adapter and says so.

    One AdamW state and learning-rate schedule run through all phases, gradients clipped to
    ``--max-grad-norm``. Ctrl-C inside a phase saves a checkpoint after the current step (in
    an epoch with its samples, rewards and reference log-probabilities, ``samples.pt``):
    ``--resume`` goes on there without new self-play; a crash loses the phase it was in.

    Outputs: ``models/spag+lora/<learner>/`` holds ``checkpoint-N`` at each phase's end (N its
    last step; ``trainer_state.json`` names the phase), ``playpen-run.json`` (the checkpoints
    under ``phases``), ``playpen-log.jsonl`` (per step: ``spag/phase``, ``train/loss``,
    ``train/kl``, ``spag/advantage_mean``, ``spag/clipped_fraction``,
    ``spag/samples[/<role>]``, ``spag/win_rate/<role>``, ``reward/<role>/mean``, ...) and
    ``learning-curve.png``; self-play episodes under ``<output_dir>/spag+lora/<learner>/``; the
    last adapter's held-out evaluation (self-play, or the Attacker against ``-t``) in
    ``results/<learner>+spag+lora-checkpoint-N/``.
    """

    config_class = SPAGConfig
    data_parallel = False  # its loop is its own: one process (TrainingRun.loop)

    @classmethod
    def check(cls, config, learner, teacher=None):
        # before any model loads: an adapter trained on another base model
        check_init_adapter(config.init_adapter, learner)

    def learn(self, game_registry) -> None:
        # refuses now (not after playing) to overwrite checkpoints or another run's results
        spag = SpagRun(self)
        spag.run.loop(lambda resume_from: self._train(spag, resume_from), spag.total_steps)
        if spag.stopped and not spag.complete and not spag.run.interrupt.requested:
            print("[playpen] stopped before the last phase ended: continue with --resume", flush=True)
        # 3. evaluate the last adapter (in the learner's model) on the held-out instances
        spag.run.finish(None if spag.stopped or self.teacher is None else [self.learner, self.teacher],
                        evaluate=spag.complete, phases=spag.phase_metrics, stopped=not spag.complete)

    def _train(self, spag: SpagRun, resume_from) -> None:
        """Every phase still to run (from the checkpoint `resume_from` continues, if any)."""
        cfg = self.config
        first, done, state = spag.position(resume_from)
        model = spag.model = spag.policy(resume_from)  # the checkpoint's adapter, --init-adapter or a fresh one
        optimization = spag.optimization(model, resume_from)
        todo = [name for name, _ in spag.phases[first:]]

        # 1. the demonstrations (imitation, and the --sft-coef mix-in)
        rows = []
        if (IMITATION in todo) or cfg.sft_coef:
            records = objective.imitation_records(cfg, self.output_dir)
            rows = objective.tokenized_turns(records, spag.tokenizer, cfg.max_length, spag.template_kwargs)
            print(f"[playpen] imitation data: {len(rows)} conversations", flush=True)
            if not rows and IMITATION in todo:  # steps on nothing would train nothing, silently
                raise DatasetError(f"no imitation conversation has an assistant turn within --max-length "
                                   f"{cfg.max_length}: raise it, or pass --imitation-steps 0")
        if todo and todo[0] == IMITATION:
            if done:
                print(f"[playpen] {IMITATION}: resumed after step {done}", flush=True)
            if not spag.imitate(model, optimization, rows, done):
                return
            spag.save(model, optimization, IMITATION, cfg.imitation_steps, {"conversations": len(rows)})
            todo, done = todo[1:], 0
            if spag.stopped:  # asked during the phase's last step: saved, stop now
                return

        # 2. epochs: self-play with the current adapter, rewards, offline optimisation
        per_instance, _ = training_slots(cfg.game_list, instances=cfg.train_instances, items=cfg.train_items)
        instances = list(dict.fromkeys(slots[0].instance for slots in per_instance))
        for name in todo:
            epoch = int(name.split("-")[1])
            if done:  # a stopped epoch resumed: its samples as saved (no new self-play)
                samples, collected = spag.saved_samples(resume_from), dict(state.get("metrics") or {})
                print(f"[playpen] {name}: resumed after step {done}", flush=True)
            else:
                samples, collected = spag.collect(model, epoch, instances)
            print(f"[playpen] {name}: {len(samples)} samples from {collected.get('rollout/episodes', 0)} "
                  f"self-play episodes", flush=True)
            if samples and not spag.optimise(model, optimization, epoch, done, samples, rows, collected):
                return
            if not samples:
                print(f"[playpen] {name}: no sample to learn from (no winner, --winners-only); the adapter "
                      f"is kept as it was", flush=True)
                spag.step += cfg.max_steps - done  # the steps keep their numbers: checkpoint-N is the phase's end
                optimization.advance(cfg.max_steps - done)
            spag.save(model, optimization, name, cfg.max_steps, collected)
            done = 0
            if spag.stopped:
                return
        spag.complete = True
