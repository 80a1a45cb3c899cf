"""Two population trainers: fictitious self-play and a league, each an :meth:`entry` /
:meth:`match` pair over :class:`~playpen.population.trainer.PopulationPlayPen`.

Matchmaking is seeded and follows its weights: :func:`deal` hands out ``n`` opponents so
that after any prefix each one has been drawn its share up to less than one draw
(:class:`playpen.training.grpo.mixes.Schedule`), so small epochs follow the weights too.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from playpen.errors import PlaypenError
from playpen.population.trainer import Entry, PopulationOptions, PopulationPlayPen
from playpen.training.common.config import option
from playpen.training.grpo.mixes import Schedule, parse_weights

WEIGHTINGS = ("uniform", "hard", "even")


def opponent_weights(win_rates: dict[str, float], weighting: str = "uniform", power: float = 2.0) -> dict[str, float]:
    """Prioritised fictitious self-play: the weight of each opponent from the learner's win
    rate ``w`` against it — ``uniform`` 1, ``hard`` ``(1 - w) ** power`` (those that beat
    it more often), ``even`` ``w (1 - w)`` (those it is even with). Normalised to sum 1; an
    all-zero result falls back to uniform."""
    if weighting not in WEIGHTINGS:
        raise PlaypenError(f"opponent weighting '{weighting}' is not one of {', '.join(WEIGHTINGS)}")
    if not win_rates:
        return {}
    raw = {n: 1.0 if weighting == "uniform" else (1 - w) ** power if weighting == "hard" else w * (1 - w)
           for n, w in win_rates.items()}
    total = sum(raw.values())
    if total <= 0:
        raw, total = {n: 1.0 for n in win_rates}, float(len(win_rates))
    return {n: v / total for n, v in raw.items()}


def deal(weights: dict[str, float], n: int, seed: int = 0) -> list[str]:
    """``n`` names drawn by ``weights`` (a seeded :class:`~playpen.training.grpo.mixes.Schedule`)."""
    positive = {k: v for k, v in weights.items() if v > 0}
    if not positive or n <= 0:
        return []
    return Schedule(positive, seed).take(n)


def seated(player: str, opponents: Sequence[str]) -> list[tuple[str, str]]:
    """``player`` against each opponent, the seat order alternating (both seatings)."""
    return [(player, o) if i % 2 == 0 else (o, player) for i, o in enumerate(opponents)]


# ----------------------------------------------------------------------------- fictitious self-play

@dataclass
class FSPOptions(PopulationOptions):
    """Fictitious self-play: the learner against frozen snapshots of its past epochs."""

    opponents: str = option("uniform", "how snapshots are drawn: uniform, hard (those that beat the learner more "
                                       "often: (1 - win rate)^2) or even (win rate x (1 - win rate))")
    self_share: float = option(0.0, "share of seatings against the learner's current self (0..1; epoch 0 "
                                    "always plays itself)")

    def __post_init__(self):
        super().__post_init__()
        if self.opponents not in WEIGHTINGS:
            raise PlaypenError(f"option --opponents: '{self.opponents}' is not valid; expected one of "
                               f"{', '.join(WEIGHTINGS)}")
        if not 0 <= self.self_share <= 1:
            raise PlaypenError(f"option --self-share: {self.self_share!r} is not valid; expected a number in [0, 1]")


class FictitiousSelfPlay(PopulationPlayPen):
    """Fictitious self-play with LoRA: the learner against frozen snapshots of its past epochs.

        playpen run fsp -l smol-135m -T 1.0 -L 40 --games adversarial_taboo --epochs 4
        playpen run fsp -l smol-135m -T 1.0 --opponents hard --init-adapter models/sft+lora/smol-135m/checkpoint-8

    Every player is a LoRA adapter of one copy of the learner's model. Epoch e: ``learner-e``
    enters as a copy of ``learner-(e-1)`` (the first: ``--init-adapter`` or fresh) and plays
    ``--matches-per-epoch`` seatings, both seat orders, against the frozen snapshots
    ``learner-0 .. learner-(e-1)`` drawn by ``--opponents`` (epoch 0 plays itself). Each
    seating plays ``--instances-per-match`` training instances ``--num-generations`` times (a
    group: the baseline of its rewards); both adapters' turns are answered in one batched
    generate per step. Only the new snapshot trains (GRPO's clipped objective, per-seat
    rewards), then it is frozen. More: docs/populations.md.

    Outputs: ``models/fsp+lora/<learner>/`` holds ``population/`` (``population.json`` and one
    adapter folder per player: ``playpen tournament -m smol-135m+<folder>`` plays them),
    ``records/epoch-N/`` (clemcore layout), ``matches.jsonl``, ``metrics.jsonl``,
    ``ratings.json`` (Elo and OpenSkill after each epoch), ``ratings.png``, ``checkpoint-E``
    per epoch (E epochs done; ``--resume`` goes on after the last complete one),
    ``playpen-log.jsonl`` (a line per epoch), ``learning-curve.png`` and ``playpen-run.json``.
    No held-out evaluation at the end: ``playpen tournament`` or ``playpen eval`` the players.
    """

    config_class = FSPOptions
    kind = "fsp"

    def entry(self, epoch: int) -> list[Entry]:
        return [Entry(f"learner-{epoch}", {"role": "learner", "epoch": epoch},
                      copy_of=f"learner-{epoch - 1}" if epoch else None)]

    def match(self, epoch: int, entrants: Sequence[str]) -> list[tuple[str, ...]]:
        cfg, me = self.config, entrants[0]
        past = [f"learner-{e}" for e in range(epoch)]
        lineage = [f"learner-{e}" for e in range(epoch + 1)]
        if not past:
            return [(me, me)] * cfg.matches_per_epoch
        weights = opponent_weights({p: self.win_rate(me, p, lineage) for p in past}, cfg.opponents)
        if cfg.self_share > 0:
            weights = {**{p: w * (1 - cfg.self_share) for p, w in weights.items()}, me: cfg.self_share}
        return seated(me, deal(weights, cfg.matches_per_epoch, self.seed * 31 + epoch))


# ----------------------------------------------------------------------------- league

@dataclass
class LeagueOptions(PopulationOptions):
    """A league: main agent, main exploiter (from epoch 1), league exploiter (from epoch 2)."""

    main_weights: str = option("self:0.35,past:0.5,exploiters:0.15", "the main agent's seatings: against itself, "
                                                                     "frozen past players (prioritised) and exploiters")
    exploiter_opponents: str = option("hard", "how the league exploiter draws frozen players: uniform, hard, even")
    reset_exploiters: bool = option(True, "each epoch's exploiters start afresh (--init-adapter or new), not as "
                                          "copies of the previous ones")

    def __post_init__(self):
        super().__post_init__()
        weights = parse_weights(self.main_weights, "main-weights")
        unknown = sorted(set(weights) - {"self", "past", "exploiters"})
        if unknown:
            raise PlaypenError(f"option --main-weights: '{unknown[0]}' is not one of self, past, exploiters")
        if self.exploiter_opponents not in WEIGHTINGS:
            raise PlaypenError(f"option --exploiter-opponents: '{self.exploiter_opponents}' is not valid; "
                               f"expected one of {', '.join(WEIGHTINGS)}")


class League(PopulationPlayPen):
    """A league with LoRA: a main agent, a main exploiter and a league exploiter on one model.

        playpen run league -l smol-135m -T 1.0 -L 40 --games adversarial_taboo --epochs 4
        playpen run league -l smol-135m -T 1.0 --main-weights self:0.2,past:0.6,exploiters:0.2

    Every player is a LoRA adapter of one copy of the learner's model. Each epoch new players
    enter and only they train; every older player stays as a frozen member: ``main-e``, a
    copy of ``main-(e-1)`` (the first: ``--init-adapter`` or fresh), its seatings dealt by
    ``--main-weights`` among itself, the frozen players (those that beat the main agents more
    often come more often) and the exploiters; ``mx-e`` (from epoch 1), the main exploiter,
    plays only the current main agent; ``lx-e`` (from epoch 2), the league exploiter, plays
    the frozen players drawn by ``--exploiter-opponents``. Exploiters start afresh each epoch
    (``--reset-exploiters``) or continue the previous ones (``--no-reset-exploiters``).
    Seatings, groups and training as ``playpen run fsp`` (its ``--help``).

    Outputs: ``models/league+lora/<learner>/``, as ``playpen run fsp``'s: ``population/``,
    ``records/epoch-N/``, ``matches.jsonl``, ``metrics.jsonl``, ``ratings.json``,
    ``ratings.png`` (Elo over epochs), ``checkpoint-E`` per epoch, ``playpen-log.jsonl``,
    ``learning-curve.png`` and ``playpen-run.json``.
    """

    config_class = LeagueOptions
    kind = "league"

    def entry(self, epoch: int) -> list[Entry]:
        cfg = self.config
        out = [Entry(f"main-{epoch}", {"role": "main", "epoch": epoch},
                     copy_of=f"main-{epoch - 1}" if epoch else None)]
        for role, short, first in (("main_exploiter", "mx", 1), ("league_exploiter", "lx", 2)):
            if epoch >= first:
                parent = None if cfg.reset_exploiters or epoch == first else f"{short}-{epoch - 1}"
                out.append(Entry(f"{short}-{epoch}", {"role": role, "epoch": epoch}, copy_of=parent))
        return out

    def match(self, epoch: int, entrants: Sequence[str]) -> list[tuple[str, ...]]:
        cfg = self.config
        n, seed = cfg.matches_per_epoch, self.seed * 31 + epoch
        frozen = [p for p in self.population.names("adapter") if p not in entrants] + \
            [p for p in self.population.names() if self.population.spec(p).kind != "adapter"]
        main = f"main-{epoch}"
        exploiters = [p for p in frozen if self.population.spec(p).info.get("role", "").endswith("exploiter")]
        exploiters += [p for p in entrants if p != main]
        kinds = parse_weights(cfg.main_weights, "main-weights")
        if not frozen:
            kinds = {"self": 1.0}
        elif not exploiters:
            kinds = {k: w for k, w in kinds.items() if k != "exploiters"} or {"self": 1.0}
        past_weights = opponent_weights({p: self.win_rate(main, p, self._lineage("main")) for p in frozen}, "hard")
        kinds_dealt = deal({k: w / sum(kinds.values()) for k, w in kinds.items()}, n, seed)
        past = iter(deal(past_weights, kinds_dealt.count("past"), seed * 7))
        opponents = []
        for i, kind in enumerate(kinds_dealt):
            opponents.append(main if kind == "self" else next(past) if kind == "past" else
                             exploiters[i % len(exploiters)])
        seatings: list[tuple[str, ...]] = seated(main, opponents)
        for name in entrants:
            role = self.population.spec(name).info.get("role")
            if role == "main_exploiter":
                seatings += seated(name, [main] * n)
            elif role == "league_exploiter":
                pool = {p: self.win_rate(name, p) for p in frozen}
                seatings += seated(name, deal(opponent_weights(pool, cfg.exploiter_opponents), n, seed * 13))
        return seatings

    def _lineage(self, role: str) -> list[str]:
        return [p for p in self.population.names() if self.population.spec(p).info.get("role") == role]
