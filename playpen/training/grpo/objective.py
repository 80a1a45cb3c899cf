"""The objective playpen's GRPO trainers minimise, written out, and the options that set it.

Every GRPO trainer (``grpo``, ``grpo-teacher``, ``hierarchical-grpo``) runs TRL's
``GRPOTrainer`` loss on advantages that playpen computes. playpen sets each term explicitly
(:func:`objective_args`) instead of inheriting TRL's defaults, so a TRL release that changes a
default does not change playpen's training silently. With the defaults:

For a step of G groups, each of n episodes of one (training instance, role), episode i of a
group with reward r_i and the learner's own tokens o_{i,1..T_i} (the game master's and the
partners' tokens are masked out of every sum)::

    A_i     = (r_i - b) / (s + 1e-4)                       --baseline (b), --scale-rewards (s)
    rho_i,t = pi_theta(o_i,t | ...) / pi_old(o_i,t | ...)  = 1 at a step's one use of its rows
    KL_i,t  = exp(l_ref - l) - (l_ref - l) - 1            l = log pi_theta, l_ref: the reference
    L(theta) = - 1/N * sum_i sum_t [ min(rho A_i, clip(rho, 1 - eps, 1 + eps_high) A_i) - beta KL_i,t ]

- b: the group's mean reward (``--baseline group``; others in :mod:`.advantages`); s: the
  group's reward standard deviation (Bessel-corrected; ``--scale-rewards group``), the
  batch's (``batch``) or 1 (``none``, Dr. GRPO's advice). A group whose rewards are all equal
  carries no signal: its advantages are exactly 0 (it is *dropped*; ``grpo/dropped_groups``).
  Its rows still count in N and, with ``--beta`` > 0, still run forward and backward for the
  KL term; with ``--beta 0`` a micro-batch of such rows skips both (``train/no_signal_rows``).
- N (``--loss-type``): ``dapo`` (default) the number of the learner's tokens in the whole step,
  so every token weighs the same; ``grpo`` averages each episode's tokens first (shorter
  episodes weigh more per token); ``dr_grpo`` divides by a constant (rows x
  max_completion_length); ``bnpo`` by the tokens of each micro-batch. ``cispo`` and ``sapo``
  are TRL's other forms, passed through.
- rho is 1 and its clip inactive in an on-policy step (rows generated once, used once:
  ``num_iterations=1``); ``--epsilon`` / ``--epsilon-high`` act on rows an older policy made
  (``--off-policy clip``).
- the reference: the adapter-free base model, or with ``--init-adapter`` a frozen copy of
  that adapter; ``--beta 0`` skips the reference pass, and with it ``train/kl``: TRL computes
  the reference log-probs only when beta != 0, and a KL logged at beta 0 would cost that extra
  forward of every row each step (not added).

Reading order for a newcomer (this list is the one; docs/trainers.md points here):

1. this module: the loss, and the options that set it;
2. :mod:`.advantages`: A (the baselines, dropped groups, credit assignment);
3. :mod:`.options`: every option of a GRPO run and its checks before any model loads;
4. :mod:`.assembly`: what ``learn()`` step 1 builds from them (dataset, reward functions,
   rollout function, model, advantages, the off-policy guard);
5. :mod:`.rollout_bridge`: the rollout function that plays the groups' episodes and returns
   the learner's tokens and masks;
6. :mod:`.watch`: the run's health per step (adapter changed, aborted share, turns) and why a
   run that cannot learn stops (``--stop-without-signal``);
7. :mod:`.steps`: how a step's rows are cut into micro-batches;
8. :mod:`playpen.training.trl_trainers`: ``PlaypenGRPOTrainer``, where TRL's loss is called;
9. :mod:`.trainer`: the two trainers and their ``learn()``;
10. as needed: :mod:`.mixes` (``--partners``, ``--game-shares``), :mod:`.past` (frozen past
    snapshots as partners), :mod:`.offpolicy` (``--max-policy-lag``: stale rows dropped or clipped).

``tests/test_grpo_reference.py`` checks the loss and gradients against TRL's stock
``GRPOTrainer`` on the same rows.
"""
from __future__ import annotations

from dataclasses import dataclass

from playpen.errors import TrainingSetupError
from playpen.training.common.config import option
from playpen.training.grpo.advantages import SCALES, CreditOptions

LOSS_TYPES = ("dapo", "grpo", "dr_grpo", "bnpo", "cispo", "sapo")


@dataclass
class ObjectiveOptions(CreditOptions):
    """The GRPO loss (see the module docstring) and how the rewards become advantages."""

    loss_type: str = option("dapo", "how token losses are averaged: dapo (over the step's learner tokens), grpo "
                                    "(per episode, then over episodes), dr_grpo (a constant), bnpo (per "
                                    "micro-batch), cispo, sapo")
    epsilon: float = option(0.2, "PPO clip: the ratio to the policy that played is kept within [1 - eps, "
                                 "1 + eps-high] (acts on off-policy rows only: a step uses its rows once)")
    epsilon_high: float = option(0.0, "the clip's upper side (0 = --epsilon; DAPO uses 0.28)")
    scale_rewards: str = option("group", "advantages divided by the group's reward std (group), the batch's "
                                         "(batch) or not at all (none)")


def validate_objective(cfg) -> None:
    """TrainingSetupError (one line) for an option of the loss out of range."""
    if cfg.loss_type not in LOSS_TYPES:
        raise TrainingSetupError(f"option --loss-type: '{cfg.loss_type}' is not valid; expected one of "
                                 f"{', '.join(LOSS_TYPES)}")
    if cfg.scale_rewards not in SCALES:
        raise TrainingSetupError(f"option --scale-rewards: '{cfg.scale_rewards}' is not valid; expected one of "
                                 f"{', '.join(SCALES)}")
    if not 0 < cfg.epsilon < 1 or cfg.epsilon_high < 0:
        raise TrainingSetupError(f"options --epsilon {cfg.epsilon} / --epsilon-high {cfg.epsilon_high}: expected "
                                 f"0 < epsilon < 1 and epsilon-high >= 0 (0 = epsilon)")


def objective_args(cfg) -> dict:
    """The ``GRPOConfig`` keywords of the loss, every one set (TRL's defaults are not relied on)."""
    return dict(loss_type=cfg.loss_type, epsilon=cfg.epsilon, epsilon_high=cfg.epsilon_high or cfg.epsilon,
                scale_rewards=cfg.scale_rewards, importance_sampling_level="token",
                mask_truncated_completions=False, top_entropy_quantile=1.0, delta=None)
