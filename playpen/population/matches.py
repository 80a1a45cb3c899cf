"""Matches of a population: who sat where, each seat's reward and the players' experiences
(:class:`MatchResult`), the reward of a match (:class:`MatchReward`), and playing seatings
of a two-player clemcore game through the rollout engine (:func:`play_seating`; the default
``play()`` of the population trainers, :func:`play_game`, and the tournaments use it).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from playpen.envs.loading import game_roles
from playpen.population.players import Population, PopulationError
from playpen.population.update import Experience
from playpen.rewards import OutcomeReward
from playpen.rollouts import InstanceRef, Learner, rollout
from playpen.rollouts.partners import as_partner
from playpen.rollouts.types import SamplingConfig
from playpen.training.common.config import split_list
from playpen.training.spag.objective import RoleOutcomeReward


@dataclass(frozen=True)
class MatchResult:
    """One episode: the players in seat order, each seat's reward, the experiences to train on."""

    players: tuple[str, ...]
    rewards: tuple[float, ...]
    experiences: tuple[Experience, ...] = ()
    game: str = ""
    instance: str = ""

    def score(self, seat: int = 0) -> float:
        """Seat ``seat``'s result against the other seat of a two-player match: 1 won, 0.5 drew, 0 lost."""
        mine, theirs = self.rewards[seat], self.rewards[1 - seat]
        if any(isinstance(r, float) and math.isnan(r) for r in (mine, theirs)):
            return 0.5
        return 1.0 if mine > theirs else 0.5 if mine == theirs else 0.0


@dataclass(frozen=True)
class MatchReward:
    """The reward of a population match, ``(EpisodeOutcome, player_name, role) -> float``.

    A game that says who won (``<Role> Win`` episode scores, as adversarial_taboo logs
    them) is scored per role: :class:`playpen.training.spag.RoleOutcomeReward` — win 1,
    tie 0, lose -1; an aborted episode costs -1 to the role that broke the format and is a
    tie for the other. Any other game (cooperative: taboo, referencegame) keeps playpen's
    :class:`~playpen.rewards.OutcomeReward`, the same reward for every seat. Without the
    per-role scores both seats of a competitive game would get the game's one outcome: every
    match a draw, and the loser trained to lose."""

    def __call__(self, outcome: Any, player_name: str = "", role: str = "") -> float:
        scores = getattr(outcome, "episode_scores", None) or {}
        if any(str(k).endswith(" Win") for k in scores):
            return RoleOutcomeReward()(outcome, player_name, role)
        return OutcomeReward()(outcome, player_name, role)


def game_seats(game: str, instances: str, items: Optional[Sequence[str]] = None) -> tuple[list[str], list[dict]]:
    """The seats (roles, or player names where roles repeat) of a two-player game, and its rows
    (`items`: only those, a ``--split``); PopulationError (one line) for a game with another
    number of players."""
    seats, rows = game_roles(game, instances, items)
    if len(seats) != 2:
        raise PopulationError(f"game '{game}' has {len(seats)} player slot(s) ({', '.join(seats)}): matches need "
                              f"a two-player game")
    return seats, rows


def play_game(trainer: Any, seatings: Sequence[tuple[str, ...]], epoch: int) -> list[MatchResult]:
    """The default :meth:`~playpen.population.trainer.PopulationPlayPen.play`: each seating plays ``--instances-per-match``
    seeded training instances ``--num-generations`` times; records go to
    ``<run>/records/epoch-N/``."""
    cfg = trainer.config
    game = split_list(cfg.games)[0]
    seats, rows = game_seats(game, cfg.train_instances, None if cfg.train_items is None else cfg.train_items[game])
    rng = random.Random(trainer.seed * 1009 + epoch)
    out: list[MatchResult] = []
    for index, seating in enumerate(seatings):
        picked = rng.sample(rows, min(cfg.instances_per_match, len(rows)))
        out += play_seating(trainer.population, game, seats, seating, picked, instances_file=cfg.train_instances,
                            num_repeats=cfg.num_generations, sampling=trainer.sampling(),
                            records_dir=trainer.run_dir / "records" / f"epoch-{epoch}",
                            run_name=f"match-{index:03d}-{'-vs-'.join(seating)}",
                            max_concurrent_episodes=cfg.max_concurrent_episodes,
                            seed=trainer.seed * 100003 + epoch * 101 + index, callbacks=trainer.callbacks)
    return out


def play_seating(population: Population, game: str, seats: Sequence[str], seating: Sequence[str],
                 rows: Sequence[dict], *, instances_file: str, num_repeats: int = 1, sampling: Any = None,
                 records_dir: Any = None, run_name: Optional[str] = None, max_concurrent_episodes: int = 16,
                 seed: Optional[int] = None, callbacks: Any = None, partners: Optional[dict] = None,
                 reward_fn: Any = None) -> list[MatchResult]:
    """One rollout of ``seating`` (player names, seat order) on ``rows``: every seat is a
    partner of the rollout (adapter players: the population's model, one generate per step
    for all of them), each episode one :class:`MatchResult` with every adapter player's
    experiences (grouped per instance and seat). ``partners``: ready partner objects by
    player name (a tournament's loaded models). ``reward_fn``: each seat's reward (default
    :class:`MatchReward`: per role where the game says who won)."""
    partners = dict(partners or {})
    seat_partners = {}
    for seat, name in zip(seats, seating):
        value = partners.get(name)
        if value is None:
            value = population.learner(name, sampling)
        seat_partners[seat] = as_partner(value, sampling=sampling) if not isinstance(value, str) else value
    refs = [InstanceRef(game, row["experiment"]["name"], int(row["game_instance"]["game_id"])) for row in rows]
    host = Learner(population.model if population is not None else None,
                   population.tokenizer if population is not None else None, name="population",
                   sampling=sampling or SamplingConfig())
    result = rollout(game, host, partners=seat_partners, instances=refs, instances_file=instances_file,
                     num_repeats=num_repeats, max_concurrent_episodes=max_concurrent_episodes,
                     records_dir=records_dir, run_name=run_name, seed=seed, callbacks=callbacks,
                     reward_fn=reward_fn or MatchReward())
    out = []
    tag = "-vs-".join(seating)
    for episode in result.episodes:
        rewards = []
        for seat in seats:  # a role, or a player name where the roles repeat
            player = seat if seat in episode.roles else \
                next((p for p, role in episode.roles.items() if role == seat), seat)
            rewards.append(float(episode.rewards.get(player, math.nan)))
        experiences = tuple(Experience.from_trajectory(t, f"{tag}/{t.group_id}/{t.role}")
                            for t in episode.trajectories if t.side_call is None)
        out.append(MatchResult(tuple(seating), tuple(rewards), experiences, episode.game,
                               f"{episode.experiment}/{episode.game_id}"))
    return out
