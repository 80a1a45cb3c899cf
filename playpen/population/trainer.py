"""PopulationPlayPen: the base class of population trainers, split into three hooks.

Each epoch:

1. :meth:`~PopulationPlayPen.entry` — who joins the population this epoch (new adapter
   players: fresh, loaded, or copies of an existing player). Only they train this epoch;
   every older player is frozen.
2. :meth:`~PopulationPlayPen.match` — who plays whom: a list of seatings (player names in
   seat order).
3. :meth:`~PopulationPlayPen.play` — the episodes: a :class:`MatchResult` per episode, with
   per-seat rewards and the players' experiences. By default a clemcore game through the
   rollout engine (all adapter players of a seating answered in one generate per step);
   override it with any function from players to rewards and experiences.

Then every match updates the ratings (Elo and OpenSkill, :mod:`playpen.ratings`), each
entrant trains on its experiences (:func:`playpen.population.update.train_player`: GRPO's
clipped objective, group baselines), and the run folder gets the new players' adapters,
``population.json``, ``matches.jsonl``, ``ratings.json`` and ``ratings.png``.
"""
from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional, Sequence

from playpen.errors import PlaypenError
from playpen.models import check_adapter, check_model_name
from playpen.population.players import POPULATION_FILE, Population, PopulationError
from playpen.population.update import Experience, train_player
from playpen.ratings import Elo, Match, OpenSkill, RatingHistory, plot_ratings
from playpen.rewards import OutcomeReward
from playpen.rollouts import InstanceRef, Learner, rollout
from playpen.rollouts.partners import as_partner
from playpen.rollouts.types import SamplingConfig
from playpen.training.common import lifecycle
from playpen.training.common.base import BasePlayPen
from playpen.training.common.config import LoraOptions, option, split_list
from playpen.training.common.lifecycle import safe_name
from playpen.training.grpo.parts import game_roles
from playpen.training.spag.objective import RoleOutcomeReward


@dataclass(frozen=True)
class Entry:
    """A player joining the population: a fresh adapter (``copy_of`` None, ``path``
    None), a copy of player ``copy_of`` or the adapter folder ``path``."""

    name: str
    info: dict = field(default_factory=dict)
    copy_of: Optional[str] = None
    path: Optional[str] = None


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


@dataclass
class PopulationOptions(LoraOptions):
    """The options of every population trainer."""

    games: str = option("adversarial_taboo", "the two-player game to play (the default play())")
    train_instances: str = option("instances_train", "instances file to train on (e.g. instances_adversarial_train)")
    epochs: int = option(3, "epochs: each one new players enter, play their matches and train")
    matches_per_epoch: int = option(4, "seatings per training player per epoch (seat order alternates)")
    instances_per_match: int = option(1, "training instances per seating")
    num_generations: int = option(4, "episodes per instance and seating: a group (the baseline of its rewards)")
    learning_rate: float = option(5e-5, "learning rate")
    rows_per_step: int = option(8, "trajectories per optimizer step")
    clip: float = option(0.2, "ratio clipping of the policy gradient")
    init_adapter: str = option("", "the first players start from this adapter (e.g. an SFT checkpoint)")
    elo_initial: float = option(1000.0, "Elo rating of a new player")
    elo_k: float = option(32.0, "Elo K factor")
    max_concurrent_episodes: int = option(16, "episodes generated together")
    models_dir: str = option("models", "root of the run folders")
    overwrite: bool = option(False, "start over in a run folder that holds a finished population")
    time_budget: float = option(0.0, "minutes of wall time for the whole run: no epoch starts that would end "
                                     "past it (estimated by the longest epoch so far); 0: no limit")

    def __post_init__(self):
        for name in ("epochs", "matches_per_epoch", "instances_per_match", "num_generations", "rows_per_step",
                     "max_concurrent_episodes"):
            if getattr(self, name) < 1:
                raise PlaypenError(f"option --{name.replace('_', '-')}: {getattr(self, name)!r} is not valid; "
                                   f"expected an integer >= 1")
        if not self.learning_rate > 0:
            raise PlaypenError(f"option --learning-rate: {self.learning_rate!r} is not valid; expected a number > 0")
        if not 0 < self.clip < 1:
            raise PlaypenError(f"option --clip: {self.clip!r} is not valid; expected a number in (0, 1)")
        if not self.time_budget >= 0:
            raise PlaypenError(f"option --time-budget: {self.time_budget!r} is not valid; expected minutes >= 0")
        if not self.elo_k > 0:
            raise PlaypenError(f"option --elo-k: {self.elo_k!r} is not valid; expected a number > 0")
        if not split_list(self.games):
            raise PlaypenError("option --games: names no game; expected a two-player game name")


class PopulationPlayPen(BasePlayPen):
    """A population trainer: override :meth:`entry` and :meth:`match` (and, for games
    without clemcore, :meth:`play`); :meth:`learn` runs the epochs."""

    config_class = PopulationOptions
    kind = "population"
    """The run folder's first part: ``<models_dir>/<kind>+lora/<learner>``."""

    def __init__(self, learner: Any, teacher: Any = None, **kwargs):
        super().__init__(learner, teacher, **kwargs)
        self.population: Optional[Population] = None
        self.results: list[MatchResult] = []
        self.epoch = 0
        self.run_dir: Optional[Path] = None
        self.rng = random.Random(self.seed)
        self.elo = self.openskill = self.history = None
        self.matches: list = []
        self.metrics: list[dict] = []

    @classmethod
    def run_root(cls, config, learner_name: str) -> Path:
        """The run folder: ``<models_dir>/<kind>+lora/<learner>``."""
        return Path(config.models_dir) / f"{cls.kind}+lora" / safe_name(learner_name)

    @classmethod
    def check(cls, config, learner, teacher=None):
        """Before anything loads: a finished run in the run folder (without --overwrite), an
        init adapter trained on another base model."""
        cls._check_run_root(cls.run_root(config, learner), config)
        if cls.play is PopulationPlayPen.play:  # the default play(): a two-player clemcore game
            game_seats(split_list(config.games)[0], config.train_instances)
        if getattr(config, "init_adapter", ""):
            entry = check_model_name(learner, "learner")
            check_adapter(config.init_adapter, str(entry.spec.get("huggingface_id", "")) or None)

    # ------------------------------------------------------------------ hooks
    def entry(self, epoch: int) -> list[Entry]:
        """The players that join in ``epoch`` (they train this epoch); default: one learner per epoch."""
        return [Entry(f"learner-{epoch}", {"role": "learner", "epoch": epoch},
                      copy_of=f"learner-{epoch - 1}" if epoch else None)]

    def match(self, epoch: int, entrants: Sequence[str]) -> list[tuple[str, ...]]:
        """The seatings of ``epoch`` (player names in seat order); default: each entrant plays itself."""
        return [(name, name) for name in entrants for _ in range(self.config.matches_per_epoch)]

    def play(self, seatings: Sequence[tuple[str, ...]], epoch: int) -> list[MatchResult]:
        """Play the seatings; default: the clemcore game of ``--games`` through the rollout
        engine (:func:`play_game`)."""
        return play_game(self, seatings, epoch)

    # ------------------------------------------------------------------ the run
    def make_population(self) -> Population:
        """The population on the learner's model: empty, new adapters of the LoRA options."""
        model, tokenizer = lifecycle.model_of(self.learner), lifecycle.tokenizer_of(self.learner)
        base = getattr(getattr(model, "config", None), "_name_or_path", "") or ""
        return Population(model, tokenizer, base, self.config.lora_config())

    def learn(self, game_registry=None) -> None:
        cfg = self.config
        self.run_dir = self._new_run_dir()
        self.population = self.make_population()
        self.elo, self.openskill, self.history = Elo(cfg.elo_initial, cfg.elo_k), OpenSkill(), RatingHistory()
        self._log_file = self.run_dir / "matches.jsonl"
        import time
        started, longest = time.monotonic(), 0.0
        self.callbacks.on_learn_start(self.name, cfg.epochs)
        for epoch in range(cfg.epochs):
            elapsed = time.monotonic() - started
            if epoch and cfg.time_budget and elapsed + longest > cfg.time_budget * 60:
                print(f"time budget: {elapsed / 60:.1f} of {cfg.time_budget:g} min used, an epoch takes up to "
                      f"{longest / 60:.1f}; stopping after {epoch} epoch(s)", flush=True)
                break
            self.epoch = epoch
            entrants = self._enter(self.entry(epoch))
            seatings = self.match(epoch, entrants)
            results = self.play(seatings, epoch)
            self._rate(results, epoch)
            metrics = {"epoch": epoch, "players": len(self.population), "matches": len(results)}
            for name in entrants:
                mine = [x for r in results for x in r.experiences if x.player == name]
                params = self.population.trainable(name)
                step = train_player(self.population.model, params, mine, learning_rate=cfg.learning_rate,
                                    temperature=self.temperature, rows_per_step=cfg.rows_per_step, clip=cfg.clip)
                metrics.update({f"{name}/{k}": v for k, v in step.items()})
            self.population.freeze()
            for name in entrants:
                self.population.set_frozen(name)
            longest = max(longest, time.monotonic() - started - elapsed)
            metrics["seconds"] = round(time.monotonic() - started, 1)
            self._save_epoch(epoch, metrics)
            if not self.callbacks.on_train_step(epoch + 1, metrics):  # a callback stops the run here
                break
        self.callbacks.on_learn_end()

    @property
    def temperature(self) -> float:
        gen = dict(getattr(self.learner, "gen_args", None) or {})
        return float(gen.get("temperature") or 1.0)

    def sampling(self):
        """The players' sampling settings: ``-T`` (0 means 1.0: greedy groups carry no signal), ``-L``."""
        return replace(SamplingConfig.from_gen_args(getattr(self.learner, "gen_args", None)),
                       temperature=self.temperature)

    @staticmethod
    def _check_run_root(root: Path, config) -> None:
        if (root / "population" / POPULATION_FILE).exists() and not config.overwrite:
            raise PopulationError(f"{root} holds a population run already: pass --overwrite to start over "
                                  f"(its files are replaced), or set --models-dir")

    def _new_run_dir(self) -> Path:
        root = self.run_root(self.config, self.learner.name)
        self._check_run_root(root, self.config)
        if root.exists() and self.config.overwrite:
            import shutil
            shutil.rmtree(root)
        root.mkdir(parents=True, exist_ok=True)
        return root

    def _enter(self, entries: Sequence[Entry]) -> list[str]:
        names = []
        for e in entries:
            path = e.path
            if path is None and e.copy_of is None and self.config.init_adapter:
                path = self.config.init_adapter
            self.population.add_adapter(e.name, {**e.info, "epoch": e.info.get("epoch", self.epoch)},
                                        path=path, copy_of=e.copy_of)
            names.append(e.name)
        return names

    def _rate(self, results: Sequence[MatchResult], epoch: int) -> None:
        lines = []
        for r in results:
            if len(r.players) == 2 and r.players[0] != r.players[1]:
                score = r.score(0)
                self.elo.update(r.players[0], r.players[1], score)
                self.openskill.update_match(r.players[0], r.players[1], score)
                self.matches.append(Match(r.players[0], r.players[1], score, r.game, r.instance))
            self.results.append(r)
            lines.append(json.dumps({"epoch": epoch, "players": list(r.players), "rewards": list(r.rewards),
                                     "game": r.game, "instance": r.instance}))
        with open(self._log_file, "a", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))

    def _save_epoch(self, epoch: int, metrics: dict) -> None:
        self.history.record(epoch, self.elo, self.openskill)
        folder = self.run_dir / "population"
        self.population.save(folder, update=True)
        self.history.save(self.run_dir / "ratings.json")
        if self.history.players():
            plot_ratings(self.history, self.run_dir / "ratings.png", title=f"{self.name}: ratings over epochs")
        self.metrics.append(metrics)
        with open(self.run_dir / "metrics.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(metrics) + "\n")
        ratings = ", ".join(f"{n} {self.elo.rating(n):.0f}" for n in self.population.names() if n in self.elo.ratings)
        print(f"epoch {epoch}: {len(self.population)} players; Elo: {ratings or 'no rated match yet'}", flush=True)

    # ------------------------------------------------------------------ helpers for match()
    def win_rate(self, player: str, opponent: str, lineage: Optional[Sequence[str]] = None) -> float:
        """How often ``player`` (or any of ``lineage``) beat ``opponent`` so far (draws count
        half; 0.5 before any match, with one virtual draw)."""
        mine = set(lineage or [player])
        score, count = 0.5, 1.0
        for r in self.results:
            if len(r.players) != 2:
                continue
            for seat in (0, 1):
                if r.players[seat] in mine and r.players[1 - seat] == opponent:
                    score += r.score(seat)
                    count += 1
        return score / count


def game_seats(game: str, instances: str) -> tuple[list[str], list[dict]]:
    """The seats (roles, or player names where roles repeat) of a two-player game, and its rows;
    PopulationError (one line) for a game with another number of players."""
    seats, rows = game_roles(game, instances)
    if len(seats) != 2:
        raise PopulationError(f"game '{game}' has {len(seats)} player slot(s) ({', '.join(seats)}): matches need "
                              f"a two-player game")
    return seats, rows


def play_game(trainer: PopulationPlayPen, seatings: Sequence[tuple[str, ...]], epoch: int) -> list[MatchResult]:
    """The default :meth:`PopulationPlayPen.play`: each seating plays ``--instances-per-match``
    seeded training instances ``--num-generations`` times; records go to
    ``<run>/records/epoch-N/``."""
    cfg = trainer.config
    game = split_list(cfg.games)[0]
    seats, rows = game_seats(game, cfg.train_instances)
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
