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
clipped objective, group baselines; an entrant copied from a player of the previous epoch
continues its optimizer state), and the run folder gets the new players' adapters,
``population.json``, ``matches.jsonl``, ``ratings.json``, ``ratings.png`` and the epoch's
checkpoint (:mod:`~playpen.population.epoch_checkpoints`). The run is one of playpen's
training lifecycle (:class:`~playpen.training.common.lifecycle.TrainingRun`): the run
folder's lock, Ctrl-C/SIGTERM (the epoch in progress is dropped, exit 130/143), ``--resume``,
the non-finite guard, ``--max-grad-norm`` and ``--lr-scheduler-type``
(:mod:`~playpen.training.common.optimization`), ``playpen-log.jsonl`` (a line per epoch) and
``playpen-run.json``. One process: the population's matches are not shared out over ranks.
"""
from __future__ import annotations

import json
import math
import random
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional, Sequence

from playpen.errors import PlaypenError
from playpen.models import check_adapter, check_model_name
from playpen.population import epoch_checkpoints
from playpen.population.matches import MatchResult, game_seats, play_game
from playpen.population.players import Population
from playpen.population.update import Experience, train_player
from playpen.ratings import Elo, Match, OpenSkill, RatingHistory, plot_ratings
from playpen.rollouts.types import SamplingConfig
from playpen.training.common import lifecycle
from playpen.training.common.base import BasePlayPen
from playpen.training.common.checkpoints import read_state
from playpen.training.common.config import LoraOptions, SplitOptions, option, split_list
from playpen.training.common.lifecycle import safe_name
from playpen.training.common.optimization import Optimization, OptimizerOptions


@dataclass(frozen=True)
class Entry:
    """A player joining the population: a fresh adapter (``copy_of`` None, ``path``
    None), a copy of player ``copy_of`` or the adapter folder ``path``."""

    name: str
    info: dict = field(default_factory=dict)
    copy_of: Optional[str] = None
    path: Optional[str] = None


@dataclass
class PopulationOptions(OptimizerOptions, LoraOptions, SplitOptions):
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
    resume: bool = option(False, "continue the run in the run folder after its last complete epoch")
    overwrite: bool = option(False, "start over in a run folder that holds checkpoints (its files are replaced)")
    save_total_limit: int = option(2, "epoch checkpoints kept (the population/ folder keeps every player)")
    lr_scheduler_type: str = option("constant", "learning-rate schedule over each player's steps: linear, cosine, "
                                                "constant, constant_with_warmup")
    time_budget: float = option(0.0, "minutes of wall time for the whole run: no epoch starts that would end "
                                     "past it (estimated by the longest epoch so far); 0: no limit")

    def __post_init__(self):
        for name in ("epochs", "matches_per_epoch", "instances_per_match", "num_generations", "rows_per_step",
                     "max_concurrent_episodes"):
            if getattr(self, name) < 1:
                raise PlaypenError(f"option --{name.replace('_', '-')}: {getattr(self, name)!r} is not valid; "
                                   f"expected an integer >= 1")
        if not self.learning_rate >= 0:  # 0: a null update (the path runs, the weights stay)
            raise PlaypenError(f"option --learning-rate: {self.learning_rate!r} is not valid; expected a number >= 0")
        if not 0 < self.clip < 1:
            raise PlaypenError(f"option --clip: {self.clip!r} is not valid; expected a number in (0, 1)")
        if not self.time_budget >= 0:
            raise PlaypenError(f"option --time-budget: {self.time_budget!r} is not valid; expected minutes >= 0")
        if not self.elo_k > 0:
            raise PlaypenError(f"option --elo-k: {self.elo_k!r} is not valid; expected a number > 0")
        if not split_list(self.games):
            raise PlaypenError("option --games: names no game; expected a two-player game name")
        if self.save_total_limit < 1:
            raise PlaypenError(f"option --save-total-limit: {self.save_total_limit!r} is not valid; expected an "
                               f"integer >= 1")
        if self.resume and self.overwrite:
            raise PlaypenError("--resume and --overwrite exclude each other: continue the run or start over")
        self.check_optimizer_options()
        self.check_split()


class PopulationPlayPen(BasePlayPen):
    """A population trainer: override :meth:`entry` and :meth:`match` (and, for games
    without clemcore, :meth:`play`); :meth:`learn` runs the epochs."""

    config_class = PopulationOptions
    data_parallel = False  # its loop is its own: one process (TrainingRun.loop)
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
        """Before anything loads: a game without two seats, an init adapter trained on
        another base model. The run folder's lock and checkpoints are the lifecycle's
        (:class:`~playpen.training.common.lifecycle.TrainingRun`)."""
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
        engine (:func:`~playpen.population.matches.play_game`)."""
        return play_game(self, seatings, epoch)

    # ------------------------------------------------------------------ the run
    def make_population(self) -> Population:
        """The population on the learner's model: empty, new adapters of the LoRA options."""
        model, tokenizer = lifecycle.model_of(self.learner), lifecycle.tokenizer_of(self.learner)
        base = getattr(getattr(model, "config", None), "_name_or_path", "") or ""
        return Population(model, tokenizer, base, self.config.lora_config())

    def learn(self, game_registry=None) -> None:
        """The epochs inside playpen's training lifecycle: the run folder's lock, a checkpoint
        per epoch (``checkpoint-E``: E epochs done), Ctrl-C/SIGTERM, ``--resume``
        (:mod:`~playpen.population.epoch_checkpoints`)."""
        cfg = self.config
        self.run_dir = self.run_root(cfg, self.learner.name)
        run = lifecycle.TrainingRun(self, self.run_dir, split_list(cfg.games))
        run.loop(lambda resume_from: self._epochs(run, resume_from), cfg.epochs)
        done = read_state(run.checkpoint).get("global_step", 0) if run.checkpoint else 0
        if done < cfg.epochs and run.interrupt.requested:
            print(f"[playpen] epoch {done} was not finished: --resume plays it again from its start", flush=True)
        run.finish(saved="population", evaluate=False, epochs_done=done,
                   population=self.population.names() if self.population is not None else [])

    def _epochs(self, run: Any, resume_from: Optional[Path]) -> None:
        cfg = self.config
        self.elo, self.openskill, self.history = Elo(cfg.elo_initial, cfg.elo_k), OpenSkill(), RatingHistory()
        self._log_file = self.run_dir / "matches.jsonl"
        states: dict[str, dict] = {}  # the optimizer states of the last epoch's entrants (their copies go on)
        first = 0
        if resume_from is not None:
            first, states = epoch_checkpoints.restore(self, resume_from)
        else:
            epoch_checkpoints.start_over(self.run_dir, cfg.overwrite)
            self.population = self.make_population()
        started, longest = time.monotonic(), 0.0
        for epoch in range(first, cfg.epochs):
            elapsed = time.monotonic() - started
            if epoch > first and cfg.time_budget and elapsed + longest > cfg.time_budget * 60:
                print(f"time budget: {elapsed / 60:.1f} of {cfg.time_budget:g} min used, an epoch takes up to "
                      f"{longest / 60:.1f}; stopping after {epoch} epoch(s)", flush=True)
                break
            self.epoch = epoch
            entries = self.entry(epoch)
            entrants = self._enter(entries)
            results = self.play(self.match(epoch, entrants), epoch)
            if run.interrupt.requested:  # the epoch is dropped; the last checkpoint stays
                return
            self._rate(results, epoch)
            metrics = {"epoch": epoch, "players": len(self.population), "matches": len(results)}
            trained: dict[str, dict] = {}
            for e in entries:
                mine = [x for r in results for x in r.experiences if x.player == e.name]
                optimization = self._optimization(e, mine, states.get(e.copy_of or "", None), run)
                step = train_player(self.population.model, optimization, mine, temperature=self.temperature,
                                    rows_per_step=cfg.rows_per_step, clip=cfg.clip,
                                    on_step=lambda _: not run.interrupt.requested)
                if run.interrupt.requested:
                    return
                metrics.update({f"{e.name}/{k}": v for k, v in step.items()})
                trained[e.name] = optimization.state_dict()
            losses = [metrics[f"{n}/train/loss"] for n in trained if metrics.get(f"{n}/train/steps")]
            if losses:
                metrics["train/loss"] = sum(losses) / len(losses)
            self.population.freeze()
            for name in entrants:
                self.population.set_frozen(name)
            longest = max(longest, time.monotonic() - started - elapsed)
            metrics["seconds"] = round(time.monotonic() - started, 1)
            self._save_epoch(epoch, metrics)
            states = trained
            epoch_checkpoints.save(self, epoch + 1, states)
            if not run.log_step(epoch + 1, metrics):  # a signal or a callback stops the run here
                break

    def _optimization(self, entry: Entry, experiences: Sequence[Experience], parent: Optional[dict], run: Any):
        """The entrant's optimizer over its steps this epoch; a copy of a player that trained
        in the previous epoch continues that player's AdamW state (the schedule starts anew)."""
        steps = math.ceil(len(experiences) / max(1, self.config.rows_per_step))
        optimization = Optimization(self.population.trainable(entry.name), self.config.learning_rate, steps,
                                    self.config, guard=run.guard)
        if parent is not None:
            optimization.load_state_dict(parent, schedule=False)
        return optimization

    @property
    def temperature(self) -> float:
        gen = dict(getattr(self.learner, "gen_args", None) or {})
        return float(gen.get("temperature") or 1.0)

    def sampling(self):
        """The players' sampling settings: ``-T`` (0 means 1.0: greedy groups carry no signal), ``-L``."""
        return replace(SamplingConfig.from_gen_args(getattr(self.learner, "gen_args", None)),
                       temperature=self.temperature)

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
            self.apply(r)
            lines.append(json.dumps({"epoch": epoch, "players": list(r.players), "rewards": list(r.rewards),
                                     "game": r.game, "instance": r.instance}))
        with open(self._log_file, "a", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))

    def apply(self, r: MatchResult) -> None:
        """One match into the ratings and the results (a resumed run replays matches.jsonl)."""
        if len(r.players) == 2 and r.players[0] != r.players[1]:
            score = r.score(0)
            self.elo.update(r.players[0], r.players[1], score)
            self.openskill.update_match(r.players[0], r.players[1], score)
            self.matches.append(Match(r.players[0], r.players[1], score, r.game, r.instance))
        self.results.append(r)

    def replay(self, lines: Sequence[dict], epochs: int) -> None:
        """Ratings, their history and the results of the first `epochs` epochs from their
        ``matches.jsonl`` lines (a resumed run)."""
        for epoch in range(epochs):
            for line in (x for x in lines if x["epoch"] == epoch):
                self.apply(MatchResult(tuple(line["players"]), tuple(line["rewards"]), (), line.get("game", ""),
                                       line.get("instance", "")))
            self.history.record(epoch, self.elo, self.openskill)

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
