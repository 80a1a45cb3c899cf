"""Mixes of a GRPO run: which partner plays the other roles of each group, and which game
each group comes from.

Both are weighted options, ``name:weight`` comma-separated, weights summing to 1:

- ``--partners programmatic:0.5,self:0.3,past:0.2`` (:data:`PARTNER_KINDS` or any registered
  model name): every group of a step draws its partner;
- ``--game-shares referencegame:0.7,taboo:0.3``: the groups of the run are dealt to the games
  by their shares, so that a game trained alongside keeps its format.

A :class:`Schedule` deals names so that after any ``n`` draws each name has been drawn
``weight * n`` times up to less than one (the name furthest behind its share comes next;
ties go to a seeded random pick): small runs follow the weights, not only long ones.
"""
from __future__ import annotations

import math
import random
from typing import Any, Optional, Sequence

from playpen.errors import TrainingSetupError, UnknownModelError
from playpen.models import check_model_name
from playpen.registry import resolve_game

SELF, PAST, TEACHER, PROGRAMMATIC = "self", "past", "teacher", "programmatic"
PARTNER_KINDS = (SELF, PAST, TEACHER, PROGRAMMATIC)
"""Partner names that are not model names: the learner itself, a frozen past checkpoint of
the learner, the ``-t`` model, the games' own programmatic players."""


def parse_weights(value: str, option: str) -> dict[str, float]:
    """``"a:0.5,b:0.5"`` → ``{"a": 0.5, "b": 0.5}``; a bare ``"a"`` is ``{"a": 1.0}``.
    TrainingSetupError (one line naming the option) for a malformed item, a weight that is
    not a number > 0, a name given twice, or weights that do not sum to 1."""
    weights: dict[str, float] = {}
    items = [item.strip() for item in value.split(",") if item.strip()]
    if not items:
        raise TrainingSetupError(f"option --{option}: '{value}' names nothing; expected NAME:WEIGHT,... "
                                 f"(e.g. {_example(option)})")
    for item in items:
        name, sep, number = item.rpartition(":")
        if not sep:
            name, number = item, "1" if len(items) == 1 else ""
        name = name.strip()
        try:
            weight = float(number)
        except ValueError:
            raise TrainingSetupError(f"option --{option}: '{item}' is not NAME:WEIGHT (e.g. {_example(option)})") \
                from None
        if not name:
            raise TrainingSetupError(f"option --{option}: '{item}' has no name (e.g. {_example(option)})")
        if not weight > 0 or math.isinf(weight):
            raise TrainingSetupError(f"option --{option}: the weight of '{name}' is {number}; expected a number > 0")
        if name in weights:
            raise TrainingSetupError(f"option --{option}: '{name}' is named twice")
        weights[name] = weight
    total = sum(weights.values())
    if abs(total - 1.0) > 1e-3:
        raise TrainingSetupError(f"option --{option}: the weights sum to {total:g}, not 1 "
                                 f"({', '.join(f'{n}:{w:g}' for n, w in weights.items())})")
    return weights


def _example(option: str) -> str:
    return "referencegame:0.7,taboo:0.3" if option == "game-shares" else "programmatic:0.5,self:0.3,past:0.2"


class Schedule:
    """Deals names by weight: each draw goes to the name whose count lags its share the
    most (``weight * (drawn + 1) - count``); ties are broken by ``random.Random(seed)``."""

    def __init__(self, weights: dict[str, float], seed: int = 0):
        if not weights:
            raise ValueError("a schedule needs at least one name")
        self.weights = dict(weights)
        self.counts = {name: 0 for name in weights}
        self.rng = random.Random(seed)

    def next(self, size: int = 1) -> str:
        """The next name; it counts ``size`` draws (a game's instance whose roles make
        several groups)."""
        total = sum(self.counts.values())
        lags = {name: w * (total + 1) - self.counts[name] for name, w in self.weights.items()}
        best = max(lags.values())
        name = self.rng.choice([n for n, lag in lags.items() if lag >= best - 1e-9])
        self.counts[name] += size
        return name

    def take(self, n: int) -> list[str]:
        return [self.next() for _ in range(n)]


# ----------------------------------------------------------------------------- games

def game_dataset_slots(per_game: dict[str, list[list[Any]]], shares: dict[str, float], num_rows: int,
                       seed: int) -> list[Any]:
    """At least ``num_rows`` slots, the groups dealt to the games by ``shares``: a game's turn
    adds its next instance's role slots (each game goes through seeded shuffled passes over
    its own instances)."""
    missing = [g for g in shares if not per_game.get(g)]
    if missing:
        raise TrainingSetupError(f"option --game-shares: {', '.join(missing)} has no training slots "
                                 f"(no instances, or none of --roles)")
    rng = random.Random(seed)
    streams = {game: _Stream(per_game[game], random.Random(rng.random())) for game in shares}
    schedule = Schedule(shares, seed)
    out: list[Any] = []
    while len(out) < num_rows:
        game = schedule.next(size=0)
        slots = streams[game].next()
        schedule.counts[game] += len(slots)
        out += slots
    return out


class _Stream:
    def __init__(self, units: list, rng: random.Random):
        self.units, self.rng, self.order = units, rng, []

    def next(self):
        if not self.order:
            self.order = list(self.units)
            self.rng.shuffle(self.order)
        return self.order.pop(0)


def check_game_shares(shares: dict[str, float], games: Sequence[str], games_default: str) -> list[str]:
    """The games of a ``--game-shares`` run: every name a known game (one line with close
    matches otherwise; no model is loaded), and ``--games``, when changed from its default,
    naming the same games."""
    for name in shares:
        resolve_game(name)  # UnknownGameError: one line, with close matches
    if list(games) != [games_default] and set(games) != set(shares):
        raise TrainingSetupError(f"--games {','.join(games)} and --game-shares {','.join(shares)} name "
                                 f"different games: give the games once, in --game-shares")
    return list(shares)


def chance_level(game: str) -> Optional[float]:
    """The success rate of a player that follows the rules but guesses, as the game declares
    it (``"chance_success"`` in its clemgame.json); None when it declares none."""
    value = resolve_game(game).spec.get("chance_success")
    return None if value is None else float(value)


# ----------------------------------------------------------------------------- partners

def check_partners(weights: dict[str, float], learner: str, teacher: Optional[str]) -> None:
    """Every partner name of ``--partners`` is a partner kind or a registered model (checked
    without loading anything); ``teacher`` needs ``-t``."""
    for name in weights:
        if name == TEACHER and not teacher:
            raise TrainingSetupError("--partners names 'teacher' but no -t/--teacher MODEL is given")
        if name in PARTNER_KINDS:
            continue
        try:
            check_model_name(name, "partner")
        except UnknownModelError as e:
            raise UnknownModelError(f"--partners: '{name}' is neither a partner kind ({', '.join(PARTNER_KINDS)}) "
                                    f"nor a registered model: {e}") from None


class PartnerMix:
    """Who plays the other roles of each group: ``weights`` (name → weight) dealt by a
    :class:`Schedule` over the groups of the run (group ``k`` of the run always gets the
    same name for a seed, also after ``--resume``); ``objects``: name → what
    :func:`playpen.rollouts.rollout` accepts as a partner (``"learner"`` for ``self``);
    ``past``: the :class:`playpen.training.grpo.past.PastPolicies` serving ``past``."""

    def __init__(self, weights: dict[str, float], objects: dict[str, Any], past: Any = None, seed: int = 0):
        missing = [n for n in weights if n not in objects and not (n == PAST and past is not None)]
        if missing:
            raise ValueError(f"no partner object for {missing}")
        self.weights, self.objects, self.past, self.seed = dict(weights), dict(objects), past, seed
        self._schedule = Schedule(self.weights, seed)
        self._dealt: list[str] = []

    def assign(self, first: int, n: int) -> list[str]:
        """The partner names of groups ``first .. first + n - 1`` of the run."""
        while len(self._dealt) < first + n:
            self._dealt.append(self._schedule.next())
        return self._dealt[first:first + n]

    def partner(self, name: str, model: Any, step: int) -> Any:
        """The partner for ``name`` in the rollouts of ``step`` (``model``: the learner's PEFT model)."""
        if name == PAST:
            return self.past.prepare(model, step)
        return self.objects[name]
