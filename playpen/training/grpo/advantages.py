"""GRPO advantages against a chosen baseline, groups without signal set to 0, and a run
without signal named on the console.

TRL's GRPOTrainer subtracts each group's mean reward (``--baseline group``). Two other
baselines (``--baseline``):

- ``running``: a per-(game, role) running mean of the role's rewards in earlier steps
  (exponential, momentum 0.9; a role's first step uses that step's mean). A group whose
  rewards differ but all lie above what the role usually gets is pushed up as a whole,
  which the group mean cannot do; a group whose rewards are all equal still gets 0, however
  far from the running mean (below);
- ``chance``: the reward a rule-following guesser would get on average, from the game's
  declared chance level (``"chance_success"`` in clemgame.json: referencegame 1/3). A
  constant answer scores at chance and so earns nothing on average.

- ``episodic``: the running mean of ``running``, updated after every episode (in the order
  of the batch) instead of once per step: each row is compared with the rows before it;
- ``constant``: a fixed reward c (``--baseline-constant``, default 0). Not plain REINFORCE
  with a constant baseline: a group whose rewards are all equal still gets 0 (below), and
  under ``--scale-rewards group`` r - c is still divided by the group's std + 1e-4; only with
  ``--scale-rewards none`` is a varied group's advantage r - c.

``running`` and ``episodic`` decay by ``--baseline-decay`` (default 0.9) per update;
``--role-baselines ROLE:BASELINE,...`` gives single roles another baseline (a proposer
with few, small groups: ``running``; its solvers: ``group``).

**Credit assignment** (``--credit``): ``flat`` (default) takes TRL's groups, consecutive
rows of ``num_generations``; ``hierarchical`` groups rows by (level, episode type, role,
group id): in a hierarchy (docs/hierarchical.md) a proposer's trajectories and its
solvers' never share a group, groups may differ in size, and every baseline above is kept
per (episode type, role) and level. The advantages used are logged per level and role
(``advantage/<level>/<role>/mean``, ``.../num``).

Every baseline divides by the group's reward std (Bessel-corrected, + 1e-4, as TRL does;
``--scale-rewards group``), by the std of the step's scored rewards (``batch``) or by 1 (``none``):
A = (r - b) / (s + 1e-4). With ``running``, ``chance`` or ``constant`` under ``group`` a group whose
rewards vary little but lie far from b gets large advantages (its small std divides a large r - b).
A group whose scored rewards are all equal (or that has fewer than two scored rows) carries
no reward signal (it is *dropped* from the policy gradient): its advantages are 0 (exactly),
whatever the baseline; its rows stay in the step for the KL term and the token count
(:mod:`.objective`); the fraction is logged per step (``grpo/dropped_groups``). Rows whose role never got a turn (reward NaN) are out
of every mean and get advantage 0.

:class:`BatchAdvantages` puts them into a generation batch of TRL's: playpen's GRPO trainer
(:class:`~playpen.training.trl_trainers.PlaypenGRPOTrainer`, constructor argument
``advantages``) hands it every batch TRL scored; the rows are those the rollout function
returned for the batch, in order.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from playpen import distributed
from playpen.outcomes import EpisodeOutcome
from playpen.training.common.config import option

BASELINES = ("group", "running", "chance", "episodic", "constant")
SCALES = ("group", "batch", "none")
CREDITS = ("flat", "hierarchical")
MOMENTUM = 0.9
NO_SIGNAL_STEPS = 3
"""Consecutive steps whose groups are all dropped before the console says the run cannot learn."""


@dataclass
class CreditOptions:
    """How the rewards of a GRPO step become advantages, and which rows are too old to use."""

    baseline: str = option("group", "advantage baseline: group (the group's mean), running (the role's running "
                                    "mean), episodic (the same, updated every episode), constant "
                                    "(--baseline-constant) or chance (the game's chance level); equal-reward groups "
                                    "get advantage 0")
    credit: str = option("flat", "credit assignment: flat (TRL's groups of --num-generations) or hierarchical "
                                 "(groups by level, episode type, role and group; docs/hierarchical.md)")
    baseline_decay: float = option(MOMENTUM, "decay of the running and episodic baselines (the old value's weight)")
    baseline_constant: float = option(0.0, "the reward subtracted by --baseline constant")
    role_baselines: str = option("", "ROLE:BASELINE,... overriding --baseline for single roles")
    max_policy_lag: int = option(0, "rows produced more than N optimizer steps ago are stale (see --off-policy)")
    off_policy: str = option("drop", "stale rows: drop (advantage 0) or clip (PPO-clipped ratio to the policy "
                                     "that produced them)")


class Advantages:
    """Advantages of one generation batch at a time, the state of the running baselines,
    and the no-signal watch.

    Args:
        baseline: one of :data:`BASELINES`.
        group_size: rows per group (TRL's ``num_generations``) with ``credit="flat"``.
        chance: ``(game, role) -> reward at chance`` (``chance`` baseline; see :func:`chance_rewards`).
        momentum: the decay of ``running`` and ``episodic`` (weight of the old value per update).
        hint: what to suggest when no step carries signal.
        credit: one of :data:`CREDITS`.
        constant: the baseline of ``constant``.
        role_baselines: role -> baseline, overriding ``baseline`` for those roles.
    """

    def __init__(self, baseline: str = "group", group_size: int = 2, chance: Optional[dict] = None,
                 momentum: float = MOMENTUM, hint: str = "", no_signal_steps: int = NO_SIGNAL_STEPS,
                 echo: Callable[[str], None] = lambda line: print(line, flush=True), *,
                 credit: str = "flat", constant: float = 0.0, role_baselines: Optional[dict] = None,
                 scale: str = "group"):
        for name in [baseline, *(role_baselines or {}).values()]:
            if name not in BASELINES:
                raise ValueError(f"baseline must be one of {', '.join(BASELINES)}, got {name!r}")
        if credit not in CREDITS:
            raise ValueError(f"credit must be one of {', '.join(CREDITS)}, got {credit!r}")
        if scale not in SCALES:
            raise ValueError(f"scale must be one of {', '.join(SCALES)}, got {scale!r}")
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"decay must be in [0, 1), got {momentum}")
        self.baseline, self.group_size, self.chance = baseline, group_size, dict(chance or {})
        self.momentum, self.hint, self.no_signal_steps, self.echo = momentum, hint, no_signal_steps, echo
        self.credit, self.constant, self.role_baselines = credit, float(constant), dict(role_baselines or {})
        self.scale = scale
        self.running: dict[tuple, float] = {}
        self.episodic: dict[tuple, float] = {}
        self.silent_steps = 0
        self.warned = False
        self.metrics: dict[str, float] = {}
        self.advantage_metrics: dict[str, float] = {}

    def baseline_of(self, role: str) -> str:
        return self.role_baselines.get(role, self.baseline)

    def compute(self, rewards: Sequence[float], roles: Sequence[str], games: Sequence[str], *,
                levels: Optional[Sequence[int]] = None, group_ids: Optional[Sequence[str]] = None) -> list[float]:
        """One advantage per row; updates the running baselines, :attr:`metrics` and
        :attr:`advantage_metrics`. ``levels`` (default all 0) and ``group_ids`` (default:
        consecutive rows of ``group_size``) matter to ``credit="hierarchical"``."""
        n = len(rewards)
        levels = [0] * n if levels is None else [int(v) for v in levels]
        if not (len(roles) == len(games) == len(levels) == n) or (group_ids is not None and len(group_ids) != n):
            raise ValueError(f"{n} rewards, {len(roles)} roles, {len(games)} games, {len(levels)} levels: "
                             f"one of each per row")
        keys = [_key(games[i], roles[i], levels[i]) for i in range(n)]
        groups = self._groups(n, keys, group_ids)
        step_mean = _means(rewards, keys)
        row_base = self._episodic_bases(rewards, roles, keys, step_mean)
        out = [0.0] * n
        dropped, flat = 0, []
        batch_std = _std([float(r) for r in rewards if _scored(r)]) if self.scale == "batch" else 0.0
        for rows in groups:
            scored = [i for i in rows if _scored(rewards[i])]
            values = [float(rewards[i]) for i in scored]
            if len(values) < 2 or max(values) - min(values) <= 1e-9:
                dropped += 1
                flat += values
                continue
            mean = sum(values) / len(values)
            std = {"group": _std(values), "batch": batch_std, "none": 0.0}[self.scale]
            divisor = 1.0 if self.scale == "none" else std + 1e-4
            key, kind = keys[rows[0]], self.baseline_of(roles[rows[0]])
            for i in scored:
                base = {"group": mean, "running": self.running.get(key, step_mean.get(key, mean)),
                        "chance": self.chance.get(key[:2]), "episodic": row_base.get(i),
                        "constant": self.constant}[kind]
                if base is None:
                    raise ValueError(f"no chance level for {key[1]} in {key[0]}")
                out[i] = (float(rewards[i]) - base) / divisor
        self.metrics = {"grpo/dropped_groups": dropped / len(groups) if groups else 0.0}
        for key, mean in step_mean.items():
            old = self.running.get(key)
            self.running[key] = mean if old is None else self.momentum * old + (1 - self.momentum) * mean
        for key in step_mean:
            shown = {"running": self.running.get(key), "episodic": self.episodic.get(key),
                     "chance": self.chance.get(key[:2]), "constant": self.constant}.get(self.baseline_of(key[1]))
            if shown is not None:
                self.metrics[_metric("grpo/baseline", key)] = shown
        self.advantage_metrics = _advantage_metrics(out, rewards, roles, levels)
        self._watch(bool(groups) and dropped == len(groups), flat)
        return out

    def _groups(self, n: int, keys: list[tuple], group_ids: Optional[Sequence[str]]) -> list[list[int]]:
        size = self.group_size
        if self.credit == "flat" or group_ids is None:
            if n % size:
                raise ValueError(f"{n} rows: not whole groups of {size}")
            chunks = [list(range(start, start + size)) for start in range(0, n, size)]
            if self.credit == "flat":
                return chunks
            group_ids = [str(i // size) for i in range(n)]
        by: dict[tuple, list[int]] = {}
        for i in range(n):  # keys[i] is (episode type, role[, level])
            by.setdefault((keys[i], group_ids[i]), []).append(i)
        return list(by.values())

    def _episodic_bases(self, rewards, roles, keys, step_mean) -> dict[int, float]:
        """Row -> its ``episodic`` baseline: the running mean of the rows before it (a role's
        first row ever: its step's mean); the running mean then takes in the row."""
        bases: dict[int, float] = {}
        for i, key in enumerate(keys):
            if self.baseline_of(roles[i]) != "episodic" or not _scored(rewards[i]):
                continue
            base = self.episodic.get(key, step_mean[key])
            bases[i] = base
            self.episodic[key] = self.momentum * base + (1 - self.momentum) * float(rewards[i])
        return bases

    def _watch(self, silent: bool, flat: list[float]) -> None:
        self.silent_steps = self.silent_steps + 1 if silent else 0
        if self.warned or self.silent_steps < self.no_signal_steps:
            return
        self.warned = True
        same = sorted(set(round(v, 6) for v in flat))
        what = (f"every scored episode got reward {same[0]:g}" if len(same) == 1
                else "within every group all episodes got the same reward")
        self.echo(f"[playpen] no learning signal: in the last {self.silent_steps} steps {what}, so every group "
                  f"was dropped and nothing is learned. {self.hint}".rstrip())


def _std(values: list[float]) -> float:
    """Bessel-corrected standard deviation (0 for fewer than two values)."""
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _scored(value) -> bool:
    return value is not None and not math.isnan(float(value))


def _key(game: str, role: str, level: int) -> tuple:
    """The key of a role's baselines: (episode type, role) at level 0, + the level below it."""
    return (game, role) if not level else (game, role, level)


def _metric(prefix: str, key: tuple) -> str:
    return f"{prefix}/{key[1]}" if len(key) == 2 else f"{prefix}/{key[2]}/{key[1]}"


def _means(rewards, keys) -> dict[tuple, float]:
    sums: dict[tuple, list] = {}
    for reward, key in zip(rewards, keys):
        if _scored(reward):
            sums.setdefault(key, []).append(float(reward))
    return {key: sum(v) / len(v) for key, v in sums.items()}


def _advantage_metrics(out, rewards, roles, levels) -> dict[str, float]:
    """``advantage/<level>/<role>/mean`` and ``/num``: the advantages of the scored rows."""
    by: dict[tuple, list[float]] = {}
    for value, reward, role, level in zip(out, rewards, roles, levels):
        if _scored(reward):
            by.setdefault((level, role), []).append(value)
    metrics = {}
    for (level, role), values in by.items():
        metrics[f"advantage/{level}/{role}/mean"] = sum(values) / len(values)
        metrics[f"advantage/{level}/{role}/num"] = float(len(values))
    return metrics


def chance_rewards(game_roles: dict[str, list[str]], reward_fn, levels: dict[str, Optional[float]]) -> dict:
    """``(game, role) -> expected reward`` of a rule-following guesser that succeeds with the
    game's chance level (``levels[game]``) and loses otherwise (Main Score 100 / 0)."""
    out = {}
    for game, roles in game_roles.items():
        level = levels.get(game)
        if level is None:
            continue
        for role in roles:
            win = reward_fn(EpisodeOutcome("success", 100.0), "", role)
            lose = reward_fn(EpisodeOutcome("failure", 0.0), "", role)
            out[(game, role)] = level * win + (1 - level) * lose
    return out


@dataclass
class BatchAdvantages:
    """The advantages a GRPO step trains on (on any number of processes): after TRL scored a
    generation batch, its advantages are replaced by ``advantages.compute`` over ``rows()``
    (``reward``, ``role``, ``game`` and, where given, ``level``, ``group_id``,
    ``policy_version``, ``logprobs`` of the batch's rows, as the rollout function returned
    them). ``guard``: a :class:`playpen.training.grpo.offpolicy.PolicyLagGuard` for rows that an
    older policy produced."""

    advantages: Advantages
    rows: Callable[[], dict]
    guard: Optional[object] = None

    def __post_init__(self):
        if not distributed.is_main():
            self.advantages.echo = lambda line: None  # rank 0 says it (every rank computes the same)

    def apply(self, output: dict, step: int) -> dict:
        """TRL's scored generation batch `output` with playpen's advantages (at optimizer step `step`)."""
        import torch
        batch = self.rows()
        # a data-parallel run: the baselines see every rank's rows (the same state on every
        # rank); this rank keeps its own rows' advantages
        keys = [k for k in ("reward", "role", "game", "level", "group_id") if batch.get(k) is not None]
        every, mine = distributed.gather_columns({k: batch[k] for k in keys})
        values = self.advantages.compute(every["reward"], every["role"], every["game"], levels=every.get("level"),
                                         group_ids=every.get("group_id"))[mine]
        old = output["advantages"]
        if old.shape[0] != len(values):
            raise RuntimeError(f"GRPO batch of {old.shape[0]} rows, rollout rows {len(values)}")
        if self.guard is not None:
            values, behaviour = self.guard.apply(values, batch.get("policy_version"), step, batch.get("logprobs"))
            if behaviour is not None:  # clip: the ratio to the policy that produced the rows
                mask = output["completion_mask"]
                output["old_per_token_logps"] = self.guard.padded(behaviour, mask.shape, mask.device)
        output["advantages"] = torch.tensor(values, dtype=old.dtype, device=old.device).reshape(old.shape)
        return output
