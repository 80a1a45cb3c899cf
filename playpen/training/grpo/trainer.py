"""The GRPO trainers over games: :class:`GRPOSelfPlayTrainer` (``playpen run grpo``: the learner
plays every role) and :class:`GRPOTeacherTrainer` (``playpen run grpo-teacher``: a frozen teacher
plays the roles the learner does not train). The loss they minimise, every term set by playpen
(``--loss-type``, ``--epsilon``, ``--scale-rewards``, ``--beta``, ``--baseline``), is written out
in :mod:`playpen.training.grpo.objective`, with the order in which to read the GRPO files. Each
class's docstring is its documentation (``playpen run grpo --help``).
"""
from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from playpen.errors import PlaypenError
from playpen.inference.types import SamplingConfig
from playpen.training.common import lifecycle
from playpen.training.common.base import BasePlayPen
from playpen.training.common.config import LoraOptions, RunConfig, report_to
from playpen.training.grpo.objective import objective_args
from playpen.training.grpo.assembly import grpo_parts
from playpen.training.grpo.options import GRPOOptions, check
from playpen.training.grpo.steps import GRPOStepOptions, correction_args, step_args


def grpo_args(cfg, run_dir: Path, *, rows: int, num_generations: int, temperature: float,
              reward_weights: Sequence[float], seed: int, engine: str = "auto") -> Any:
    """playpen's GRPOConfig of every GRPO trainer: `rows` trajectories per step, generated once and
    trained once in micro-batches (flat memory; no old-logprob pass), ``--share-prompts``; with
    ``engine`` vllm, the rollouts' logprobs corrected (:func:`playpen.training.grpo.steps.correction_args`)."""
    from playpen.training.trl_trainers import PlaypenGRPOConfig
    return PlaypenGRPOConfig(
        output_dir=str(run_dir), max_steps=cfg.max_steps, learning_rate=cfg.learning_rate, beta=cfg.beta,
        num_generations=num_generations, shuffle_dataset=False, temperature=temperature,
        logging_steps=1, save_strategy="steps", save_steps=cfg.save_steps,
        save_total_limit=cfg.save_total_limit, report_to=report_to(cfg.report_to), seed=seed,
        disable_tqdm=True, log_completions=False,
        **step_args(rows, cfg.micro_batch_size, cfg.gradient_checkpointing), **objective_args(cfg),
        **correction_args(cfg, engine),
        reward_weights=list(reward_weights), dataloader_num_workers=0, share_prompts=cfg.share_prompts,
        **lifecycle.precision_kwargs(cfg.precision))


@dataclass
class GRPOSelfPlayConfig(GRPOOptions, GRPOStepOptions, LoraOptions, RunConfig):
    """Every option is shared: the run (RunConfig), LoRA and GRPO over games."""


@dataclass
class GRPOTeacherConfig(GRPOOptions, GRPOStepOptions, LoraOptions, RunConfig):
    """The options of self-play; ``--roles`` picks the learner's roles."""


class _GRPOGamesTrainer(BasePlayPen):
    """GRPO with LoRA over games; `partner()` names who plays the roles the learner does not."""

    @abc.abstractmethod
    def partner(self) -> tuple[str, Optional[Any]]:
        """(the run's partner folder name, the teacher model or None)."""

    @classmethod
    def check(cls, config, learner, teacher=None):
        # before any model loads: an init adapter of another base model, unknown partners or games
        check(config, learner, teacher)

    def learn(self, game_registry) -> None:
        from playpen.training.trl_trainers import PlaypenGRPOTrainer

        cfg = self.config
        partner, teacher = self.partner()
        run_name = f"grpo+lora/{lifecycle.safe_name(self.learner.name)}/{partner}"
        # refuses now (not after training) to overwrite checkpoints or another run's results
        run = lifecycle.TrainingRun(self, Path(cfg.models_dir) / run_name, cfg.game_list,
                                    eval_prefix=f"{self.learner.name}+grpo+lora-{partner}-")
        # 1. the groups ((training instance, role) slots, an instance's roles side by side),
        #    one reward function per role, and the rollout function that plays the slots'
        #    episodes with the current policy (and the teacher in the roles the learner does not train)
        parts = grpo_parts(self, run, teacher=teacher, records_dir=self.output_dir / run_name)

        # 2. TRL: adapters only; the reference policy of the KL term is the adapter-free base, or
        #    with --init-adapter a frozen copy of that adapter (a second LoRA adapter, no model copy)
        args = grpo_args(cfg, run.run_dir, rows=parts.batch_size, num_generations=cfg.num_generations,
                         temperature=parts.temperature, reward_weights=parts.reward_weights, seed=self.seed,
                         engine=SamplingConfig.from_gen_args(getattr(self.learner, "gen_args", None)).engine)
        #    and playpen's step: advantages against --baseline (equal-reward groups dropped), the
        #    --sft-coef anchor, each step's time split
        trainer = PlaypenGRPOTrainer(
            model=parts.model, reward_funcs=parts.reward_funcs, args=args, train_dataset=parts.dataset,
            processing_class=parts.tokenizer, peft_config=parts.peft_config, rollout_func=parts.rollout_func,
            callbacks=[run.trainer_callback(extra_metrics=parts.extra_metrics, stop_when=parts.stop_reason)],
            **parts.trainer_options())

        # 3. train (Ctrl-C saves a checkpoint and stops); 4. evaluate the adapter (the learner
        #    carries it in memory) on the held-out instances, write the summary and the curve
        run.train(trainer)
        players = [self.learner] + ([teacher] if teacher is not None else [])
        run.finish(players, partner=partner, records=str(self.output_dir / run_name))


class GRPOSelfPlayTrainer(_GRPOGamesTrainer):
    """GRPO with LoRA; the learner plays every role (self-play).

        playpen run grpo -l smol-135m -T 1.0 -L 40
        playpen run grpo -l smol-135m -T 1.0 --init-adapter models/sft+lora/smol-135m/checkpoint-8 --beta 0.05
        playpen run grpo -l smol-135m -T 1.0 --partners programmatic:0.5,self:0.3,past:0.2
        playpen run grpo -l smol-135m --resume      # after Ctrl-C or a crash

    Each optimizer step plays ``--groups-per-step`` groups. A group is one training instance
    and one role, played ``--num-generations`` times; the role's trajectories (token-exact,
    from the rollout engine) are its rows, trained with that role's reward (one TRL reward
    function per role: TRL logs ``rewards/role:<R>/mean|std``), normalised within the group.
    Game-master and partner tokens ride in the completion with ``env_mask = 0``: no loss. In
    self-play the roles of an instance share its episodes. ``-T`` is the rollouts'
    temperature (0 becomes 1.0: greedy groups carry no signal), ``-L`` the tokens per turn.
    With ``--init-adapter`` the KL term's reference is that adapter, kept frozen as a second
    adapter of the same model. The loss, every term set by playpen (defaults: ``--loss-type dapo``,
    ``--epsilon 0.2``, ``--epsilon-high 0`` = ε, ``--scale-rewards group``, ``--baseline group``,
    ``--beta 0.02``; derivation and reading order: playpen/training/grpo/objective.py):

        A_i = (r_i - mean of the group's r) / (std of the group's r + 1e-4)    (0 if all r are equal)
        L = -1/N sum_i sum_t [min(rho A_i, clip(rho, 1 - eps, 1 + eps_high) A_i) - beta KL_t]
            N = the step's learner tokens; rho = 1 on-policy; KL_t to the reference (base or start adapter)

    Against collapse to a private protocol and forgetting (``--baseline``, ``--partners``,
    ``--game-shares``, ``--sft-coef``): docs/trainers.md.

    Outputs: ``models/grpo+lora/<learner>/selfplay/`` holds ``checkpoint-N`` (the adapter;
    ``ref/`` and ``past/`` beside it when there is a frozen reference or past snapshot),
    ``playpen-log.jsonl`` (loss, reward per role, % played, KL, time split, one ``episode``
    line per episode), ``learning-curve.png`` and ``playpen-run.json``; every episode is
    recorded in clemcore's layout under ``<output_dir>/grpo+lora/<learner>/selfplay/``
    (``clem score`` works on it); the held-out evaluation goes to
    ``results/<learner>+grpo+lora-selfplay-checkpoint-N/``.
    """

    config_class = GRPOSelfPlayConfig

    def partner(self):
        return "selfplay", None


class GRPOTeacherTrainer(_GRPOGamesTrainer):
    """GRPO with LoRA; the learner plays one role, a frozen teacher the others.

        playpen run grpo-teacher -l smol-135m -t programmatic -T 1.0 -L 40
        playpen run grpo-teacher -l smol-135m -t my-remote --roles "Instruction Giver"
        playpen run grpo-teacher -l smol-135m -t programmatic --resume

    The teacher ``-t`` is any registered model, never trained: a local HF model (its turns
    batched with the learner's), ``programmatic`` (the games' own competent players) or a
    remote OpenAI-compatible model from key.json (called concurrently). A group is one
    training instance played ``--num-generations`` times with the learner in one role
    (``--roles``; default: each role in turn, each with its own group). Everything else, the
    masking and the options, is ``playpen run grpo``'s (its ``--help``).

    Outputs: as ``playpen run grpo``'s, in ``models/grpo+lora/<learner>/<teacher>/`` and
    ``<output_dir>/grpo+lora/<learner>/<teacher>/``; the held-out evaluation (the teacher in
    the other roles) in ``results/<learner>+grpo+lora-<teacher>-checkpoint-N/``.
    """

    config_class = GRPOTeacherConfig

    def partner(self):
        if self.teacher is None:
            raise PlaypenError("this trainer needs a teacher: pass -t/--teacher MODEL "
                               "(e.g. -t programmatic), or use `playpen run grpo` for self-play")
        return lifecycle.safe_name(self.teacher.name), self.teacher
