"""What a GRPO run hands to TRL, built from its options (:mod:`playpen.training.grpo.options`):
:func:`grpo_parts` (the slot dataset, the reward functions, the rollout function of
:mod:`playpen.training.grpo.rollout_bridge`, the model) and the parts the options against collapse
add: :func:`share_dataset` (``--game-shares``), :func:`partner_mix` (``--partners``, ``--past-every``),
:func:`make_advantages` (``--baseline``, ``--credit``), :func:`make_guard` (``--max-policy-lag``).

See :mod:`playpen.training.grpo.mixes`, :mod:`playpen.training.grpo.advantages` and
:mod:`playpen.training.grpo.past`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional

from playpen.callbacks import CallbackList, JsonlLogCallback
from playpen.distributed import check_groups
from playpen.errors import GRPOSetupError, TrainingSetupError
from playpen.models import load_init_adapter, load_model_by_name
from playpen.peft_internals import set_lora_dropout
from playpen.rewards import BinaryReward, OutcomeReward
from playpen.rollouts.chat import template_kwargs_of, warn_if_discontinuous
from playpen.rollouts.types import SamplingConfig
from playpen.training.common import lifecycle
from playpen.training.common.config import split_list
from playpen.training.common.plotting import LOG_FILE
from playpen.training.grpo.advantages import Advantages, BatchAdvantages, chance_rewards
from playpen.training.grpo.mixes import (PAST, PROGRAMMATIC, SELF, TEACHER, PartnerMix, chance_level,
                                         game_dataset_slots, parse_weights)
from playpen.training.grpo.offpolicy import PolicyLagGuard
from playpen.training.grpo.options import role_baselines
from playpen.training.grpo.past import PastPolicies
from playpen.training.grpo.watch import stop_reason
from playpen.training.grpo.rollout_bridge import GameRollout, reward_functions, slot_dataset, training_slots
from playpen.training.rubrics.files import read_rubric
from playpen.training.sft.anchor import SFTAnchor, demonstration_rows


NO_SIGNAL_HINT = ("Start from a supervised adapter (`playpen run sft`, then --init-adapter "
                  "models/sft+lora/<learner>/checkpoint-N) or mix in a competent partner "
                  "(--partners programmatic:0.5,self:0.5, or -t programmatic with `playpen run grpo-teacher`).")


@dataclass(frozen=True)
class GRPOParts:
    """What a GRPO trainer hands to TRL: the slot dataset, one reward function per role
    (and their weights), the rollout function, the model (with ``--init-adapter`` loaded)
    and the LoRA config for a fresh adapter (None when training ``--init-adapter``)."""

    dataset: Any
    reward_funcs: list
    reward_weights: list
    rollout_func: GameRollout
    model: Any
    peft_config: Any
    tokenizer: Any
    temperature: float
    batch_size: int
    advantages: Any = None
    guard: Any = None
    sft_anchor: Any = None
    stop_after: int = 0

    def stop_reason(self) -> Optional[str]:
        """Why the run cannot learn (:func:`~playpen.training.grpo.watch.stop_reason`), or None."""
        return stop_reason(self.stop_after, self.advantages, self.rollout_func.watch)

    def trainer_options(self) -> dict:
        """The constructor arguments of playpen's GRPO trainer
        (:class:`~playpen.training.trl_trainers.PlaypenGRPOTrainer`) from these parts: the run's
        advantages (``--baseline``, ``--credit``, stale rows) and, with ``--sft-coef``, its
        supervised anchor."""
        return dict(advantages=BatchAdvantages(self.advantages, lambda: self.rollout_func.last_rows, self.guard),
                    sft_anchor=self.sft_anchor)

    def extra_metrics(self) -> dict:
        """Per step, next to TRL's: rollout statistics, partner shares, dropped groups, baselines."""
        out = {**self.rollout_func.last_metrics}
        if self.advantages is not None:
            out.update({**self.advantages.metrics, **self.advantages.advantage_metrics})
        if self.guard is not None:
            out.update(self.guard.metrics)
        if self.sft_anchor is not None:
            out.update(self.sft_anchor.metrics)
        return out


def load_rubric(path: str, learner: Any, run_dir) -> Any:
    """The :class:`~playpen.training.rubrics.rubric.Rubric` of ``--rubric`` (None without one), its
    judges loaded; unparsable judge replies are logged to ``rubric-judge.jsonl`` in the run folder."""
    if not path:
        return None
    from pathlib import Path
    return read_rubric(path).build(learner=learner, log_file=Path(run_dir) / "rubric-judge.jsonl")


def grpo_parts(trainer, run, *, teacher: Any, records_dir) -> GRPOParts:
    """Build the TRL-facing parts of a GRPO run of ``trainer`` (a BasePlayPen whose config
    has :class:`GRPOOptions`, LoRA options and :class:`~playpen.training.common.config.RunConfig`)
    for ``run`` (a :class:`~playpen.training.common.lifecycle.TrainingRun`). ``teacher``: None for
    self-play, else the partner of every role the learner does not train."""
    cfg = trainer.config
    if cfg.reward not in ("outcome", "binary"):
        raise GRPOSetupError(f"--reward must be outcome or binary, got '{cfg.reward}'")
    check_groups(cfg.groups_per_step)  # a data-parallel run: whole groups on every rank
    per_instance, roles_of_games = training_slots(cfg.game_list, split_list(cfg.roles), cfg.train_instances,
                                                  cfg.train_items)
    dataset = share_dataset(cfg, per_instance, trainer.seed) if cfg.game_shares else \
        slot_dataset(per_instance, cfg.groups_per_step * cfg.max_steps, trainer.seed)
    reward_funcs, reward_weights = reward_functions(sorted({s.role for slots in per_instance for s in slots}))
    # greedy groups carry no signal: -T 0 means the default sampling temperature 1.0
    sampling = SamplingConfig.from_gen_args(getattr(trainer.learner, "gen_args", None))
    sampling = replace(sampling, temperature=sampling.temperature or 1.0)
    tokenizer = lifecycle.tokenizer_of(trainer.learner)
    warn_if_discontinuous(tokenizer, trainer.learner.name, template_kwargs_of(trainer.learner))
    # every finished episode goes to the callbacks and the run's JSON log
    episode_callbacks = CallbackList([trainer.callbacks, JsonlLogCallback(run.run_dir / LOG_FILE)])
    reward_fn = BinaryReward() if cfg.reward == "binary" else OutcomeReward()
    rollout_func = GameRollout(
        trainer.learner.name, tokenizer, num_generations=cfg.num_generations, game_roles=roles_of_games,
        teacher=teacher, sampling=sampling, records_dir=records_dir, callbacks=episode_callbacks,
        reward_fn=reward_fn, max_concurrent_episodes=cfg.max_concurrent_episodes, instances=cfg.train_instances,
        seed=trainer.seed, mix=partner_mix(trainer, teacher, tokenizer, sampling),
        augment=cfg.augment, rubric=load_rubric(cfg.rubric, trainer.learner, run.run_dir),
        augment_variants=cfg.augment_variants, learning_rate=cfg.learning_rate)
    advantages = make_advantages(cfg, roles_of_games, reward_fn)
    model, peft_config = lifecycle.model_of(trainer.learner), cfg.lora_config()
    if cfg.init_adapter:
        model = load_init_adapter(model, cfg.init_adapter)
        set_lora_dropout(model, cfg.lora_dropout)
        peft_config = None
    anchor = None
    if cfg.sft_coef > 0:  # demonstrations of the trained roles, played (and kept) beside the records
        from pathlib import Path
        rows = demonstration_rows(cfg.game_list, split_list(cfg.roles), cfg.train_instances, Path(records_dir),
                                  tokenizer, trainer.seed, cfg.train_items)
        anchor = SFTAnchor(rows, cfg.sft_coef, cfg.sft_batch)
    return GRPOParts(dataset, reward_funcs, reward_weights, rollout_func, model, peft_config, tokenizer,
                     sampling.temperature, cfg.num_generations * cfg.groups_per_step, advantages,
                     make_guard(cfg), anchor, cfg.stop_without_signal)


def share_dataset(cfg, per_instance: list, seed: int):
    """The slot dataset of a ``--game-shares`` run: groups dealt to the games by share."""
    from datasets import Dataset
    per_game: dict[str, list] = {}
    for slots in per_instance:
        per_game.setdefault(slots[0].game, []).append(slots)
    slots = game_dataset_slots(per_game, parse_weights(cfg.game_shares, "game-shares"),
                               cfg.groups_per_step * cfg.max_steps, seed)
    return Dataset.from_list([{"prompt": s.to_prompt()} for s in slots])


def partner_mix(trainer, teacher: Any, tokenizer: Any, sampling: Any) -> PartnerMix:
    """The run's partner mix: ``--partners``, else the trainer's own partner (``teacher``;
    None: self-play). Model names load here (as partners, with the learner's sampling)."""
    cfg = trainer.config
    weights = parse_weights(cfg.partners, "partners") if cfg.partners else {TEACHER if teacher is not None
                                                                            else SELF: 1.0}
    objects: dict[str, Any] = {SELF: "learner", PROGRAMMATIC: PROGRAMMATIC}
    if TEACHER in weights:
        objects[TEACHER] = teacher if teacher is not None else trainer.teacher
        if objects[TEACHER] is None:
            raise TrainingSetupError("--partners names 'teacher' but no -t/--teacher MODEL is given")
    past = None
    for name in weights:
        if name == PAST:
            past = PastPolicies(tokenizer, trainer.learner.name, sampling, cfg.past_every, trainer.seed)
        elif name not in objects:
            objects[name] = load_model_by_name(name, role="partner", gen_args=dict(
                temperature=sampling.temperature, max_tokens=sampling.max_new_tokens))
    return PartnerMix(weights, objects, past, trainer.seed)


def make_advantages(cfg, game_roles: dict[str, list[str]], reward_fn) -> Advantages:
    """The advantage computation of ``--baseline`` for groups of ``--num-generations``."""
    chance = None
    if "chance" in (cfg.baseline, *role_baselines(cfg).values()):
        chance = chance_rewards(game_roles, reward_fn, {game: chance_level(game) for game in game_roles})
    hint = NO_SIGNAL_HINT
    if cfg.init_adapter:
        hint = ("Mix in a competent partner (--partners programmatic:0.5,self:0.5) or raise the sampling "
                "temperature (-T) so that the episodes of a group differ.")
    return Advantages(cfg.baseline, cfg.num_generations, chance=chance, hint=hint, momentum=cfg.baseline_decay,
                      credit=cfg.credit, constant=cfg.baseline_constant, role_baselines=role_baselines(cfg),
                      scale=cfg.scale_rewards)


def make_guard(cfg):
    """The off-policy guard of ``--max-policy-lag`` and ``--off-policy``."""
    return PolicyLagGuard(cfg.max_policy_lag, cfg.off_policy)
