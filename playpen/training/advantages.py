"""GRPO advantages against a chosen baseline, groups without signal dropped, and a run
without signal named on the console.

TRL's GRPOTrainer subtracts each group's mean reward (``--baseline group``). Two other
baselines (``--baseline``):

- ``running``: a per-(game, role) running mean of the role's rewards in earlier steps
  (exponential, momentum 0.9; a role's first step uses that step's mean). A group that is
  all better than the role usually does is pushed up as a whole, which the group mean
  cannot do;
- ``chance``: the reward a rule-following guesser would get on average, from the game's
  declared chance level (``"chance_success"`` in clemgame.json: referencegame 1/3). A
  constant answer scores at chance and so earns nothing on average.

Every baseline divides by the group's reward std (Bessel-corrected, + 1e-4, as TRL does).
A group whose scored rewards are all equal (or that has fewer than two scored rows) is
**dropped**: its advantages are 0 (exactly), whatever the baseline; the fraction is logged
per step (``grpo/dropped_groups``). Rows whose role never got a turn (reward NaN) are out
of every mean and get advantage 0.

:func:`install` puts the advantages into a TRL trainer (single process) by wrapping its
``_generate_and_score_completions`` on the instance: the rows are those the rollout
function returned for the generation batch, in order.
"""
from __future__ import annotations

import math
from typing import Callable, Optional, Sequence

BASELINES = ("group", "running", "chance")
MOMENTUM = 0.9
NO_SIGNAL_STEPS = 3
"""Consecutive steps whose groups are all dropped before the console says the run cannot learn."""


class Advantages:
    """Advantages of one generation batch at a time (consecutive groups of ``group_size``
    rows), the state of the running baseline, and the no-signal watch.

    Args:
        baseline: one of :data:`BASELINES`.
        group_size: rows per group (TRL's ``num_generations``).
        chance: ``(game, role) -> reward at chance`` (``chance`` baseline; see :func:`chance_rewards`).
        hint: what to suggest when no step carries signal.
    """

    def __init__(self, baseline: str = "group", group_size: int = 2, chance: Optional[dict] = None,
                 momentum: float = MOMENTUM, hint: str = "", no_signal_steps: int = NO_SIGNAL_STEPS,
                 echo: Callable[[str], None] = lambda line: print(line, flush=True)):
        if baseline not in BASELINES:
            raise ValueError(f"baseline must be one of {', '.join(BASELINES)}, got {baseline!r}")
        self.baseline, self.group_size, self.chance = baseline, group_size, dict(chance or {})
        self.momentum, self.hint, self.no_signal_steps, self.echo = momentum, hint, no_signal_steps, echo
        self.running: dict[tuple, float] = {}
        self.silent_steps = 0
        self.warned = False
        self.metrics: dict[str, float] = {}

    def compute(self, rewards: Sequence[float], roles: Sequence[str], games: Sequence[str]) -> list[float]:
        """One advantage per row; updates the running baseline and :attr:`metrics`."""
        n, size = len(rewards), self.group_size
        if n % size or not (len(roles) == len(games) == n):
            raise ValueError(f"{n} rewards, {len(roles)} roles, {len(games)} games: not whole groups of {size}")
        step_mean = _means(rewards, roles, games)
        out = [0.0] * n
        dropped, flat = 0, []
        for start in range(0, n, size):
            rows = range(start, start + size)
            scored = [i for i in rows if _scored(rewards[i])]
            values = [float(rewards[i]) for i in scored]
            if len(values) < 2 or max(values) - min(values) <= 1e-9:
                dropped += 1
                flat += values
                continue
            mean = sum(values) / len(values)
            std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
            key = (games[start], roles[start])
            base = {"group": mean, "running": self.running.get(key, step_mean.get(key, mean)),
                    "chance": self.chance.get(key)}[self.baseline]
            if base is None:
                raise ValueError(f"no chance level for {key[1]} in {key[0]}")
            for i in scored:
                out[i] = (float(rewards[i]) - base) / (std + 1e-4)
        groups = n // size
        self.metrics = {"grpo/dropped_groups": dropped / groups if groups else 0.0}
        for key, mean in step_mean.items():
            old = self.running.get(key)
            self.running[key] = mean if old is None else self.momentum * old + (1 - self.momentum) * mean
        if self.baseline != "group":
            shown = self.running if self.baseline == "running" else self.chance
            self.metrics.update({f"grpo/baseline/{role}": value for (game, role), value in shown.items()
                                 if (game, role) in step_mean})
        self._watch(groups and dropped == groups, flat)
        return out

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


def _scored(value) -> bool:
    return value is not None and not math.isnan(float(value))


def _means(rewards, roles, games) -> dict[tuple, float]:
    sums: dict[tuple, list] = {}
    for reward, role, game in zip(rewards, roles, games):
        if _scored(reward):
            sums.setdefault((game, role), []).append(float(reward))
    return {key: sum(v) / len(v) for key, v in sums.items()}


def chance_rewards(game_roles: dict[str, list[str]], reward_fn, levels: dict[str, Optional[float]]) -> dict:
    """``(game, role) -> expected reward`` of a rule-following guesser that succeeds with the
    game's chance level (``levels[game]``) and loses otherwise (Main Score 100 / 0)."""
    from playpen.outcomes import EpisodeOutcome
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


def install(trainer, advantages: Advantages, rows: Callable[[], dict]) -> None:
    """Make ``trainer`` (a TRL GRPOTrainer, one process) train on ``advantages``: after TRL
    scored a generation batch, its advantages are replaced by ``advantages.compute`` over
    ``rows()`` (``reward``, ``role``, ``game`` of the batch's rows, as the rollout function
    returned them)."""
    import torch
    if getattr(getattr(trainer, "accelerator", None), "num_processes", 1) != 1:
        raise NotImplementedError("playpen's GRPO baselines run in one process")
    original = trainer._generate_and_score_completions

    def generate_and_score(inputs):
        output = original(inputs)
        batch = rows()
        values = advantages.compute(batch["reward"], batch["role"], batch["game"])
        old = output["advantages"]
        if old.shape[0] != len(values):
            raise RuntimeError(f"GRPO batch of {old.shape[0]} rows, rollout rows {len(values)}")
        output["advantages"] = torch.tensor(values, dtype=old.dtype, device=old.device).reshape(old.shape)
        return output

    trainer._generate_and_score_completions = generate_and_score
