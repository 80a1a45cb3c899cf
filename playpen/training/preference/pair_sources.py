"""DPO from games: where the pairs of a round come from (the data half of
``playpen run dpo``; :mod:`playpen.training.preference` trains on them).

``--source branching`` plays training instances with the current policy, forks every
episode at a learner turn (``--fork-turns``; 0 = the first move) into ``--branches``
continuations, lets the partner (the teacher ``-t``: a model or ``programmatic``; without
one the learner plays every role) finish each branch, and ranks the branches by the
forked player's reward (:func:`playpen.pairs.branch_pairs`). ``--source records`` pairs
won with lost or aborted episodes of the same instance in a results folder
(:func:`playpen.pairs.recorded_pairs`); ``--source pairs`` reads a pairs file.
"""
from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from playpen import distributed
from playpen.callbacks import CallbackList, JsonlLogCallback
from playpen.data import DatasetFilter, conversational_records, role_key
from playpen.errors import DatasetError, TrainingSetupError
from playpen.pairs import PreferencePair, branch_pairs, read_pairs, recorded_pairs
from playpen.registry import close_matches
from playpen.rollouts import Branching, InstanceRef, Learner, rollout
from playpen.rollouts.chat import template_kwargs_of
from playpen.rollouts.types import SamplingConfig
from playpen.training.common import lifecycle
from playpen.training.common.config import option, split_list
from playpen.training.common.plotting import LOG_FILE
from playpen.training.grpo.rollout_bridge import training_slots

SOURCES = ("branching", "records", "pairs")


@dataclass
class PairSourceOptions:
    """Where DPO's pairs come from."""

    source: str = option("branching", "pairs from: branching (fork the learner's episodes at its turns, "
                                      "rank the branches by outcome), records (won vs lost episodes of an "
                                      "instance in --records), pairs (--pairs-file)")
    records: str = option("", "--source records: a results folder (clem run, clembench-runs, playpen records)")
    pairs_file: str = option("", "--source pairs: JSON lines of pairs (playpen dataset RESULTS --pairs)")
    roles: str = option("", "roles whose turns are compared (comma-separated; empty = all)")
    fork_turns: str = option("0", "branching: the learner turns to fork at (0 = first move; comma-separated)")
    branches: int = option(4, "branching: continuations of each fork")
    pair_instances: int = option(8, "branching: training instances played per role and fork turn each round "
                                    "(0 = all)")
    max_concurrent_episodes: int = option(16, "branching: episodes generated together")

    def validate(self) -> None:
        if self.split and self.source != "branching":
            raise TrainingSetupError(f"--split chooses the training instances --source branching plays: it does not "
                                     f"filter --source {self.source} (drop one or the other)")
        super().validate()
        if self.source not in SOURCES:
            raise TrainingSetupError(f"unknown pair source '{self.source}'.{close_matches(self.source, list(SOURCES))}"
                                     f" Choose from: {', '.join(SOURCES)}")
        if self.source == "records" and not (self.records and Path(self.records).is_dir()):
            raise TrainingSetupError(f"--source records needs --records DIR, a results folder"
                                     f"{f'; {self.records!r} is none' if self.records else ''}")
        if self.source == "pairs" and not (self.pairs_file and Path(self.pairs_file).is_file()):
            raise TrainingSetupError(f"--source pairs needs --pairs-file FILE, a JSON-lines file of pairs"
                                     f"{f'; {self.pairs_file!r} does not exist' if self.pairs_file else ''}")

    @property
    def turns(self) -> list[int]:
        return [int(t) for t in split_list(self.fork_turns)]


def check_pairs_file(config) -> None:
    """--source pairs: the file holds at least one well-formed pair (DatasetError)."""
    if config.source == "pairs":
        read_pairs(config.pairs_file)


# ----------------------------------------------------------------------------- recorded pairs

def records_pairs(config) -> list[PreferencePair]:
    """--source records: pairs of the folder's episodes of the configured games and roles."""
    records, _ = conversational_records(config.records, DatasetFilter(games=tuple(config.game_list)),
                                        include_programmatic=True)
    roles = {role_key(r) for r in split_list(config.roles)}
    if roles:
        records = [r for r in records if role_key(r["meta"].get("game_role", "")) in roles
                   or r["meta"].get("player_name") in split_list(config.roles)]
    pairs = recorded_pairs(records)
    if not pairs:
        raise DatasetError(f"no preference pairs in {config.records} for {config.games}: it needs a won and a "
                           f"lost or aborted episode of the same instance and role that part at that role's turn")
    return pairs


# ----------------------------------------------------------------------------- branching

class BranchCollector:
    """``(round, policy) -> pairs`` for --source branching: per role and fork turn, plays
    ``--pair-instances`` sampled training instances with `policy`, forked at that turn of
    that role into ``--branches`` branches; records go to `records_dir`.

    `trainer` is the trainer (its learner, config, seed, callbacks); `teacher` plays the
    other roles (None: self-play, the learner plays them too).
    """

    def __init__(self, trainer, records_dir: Path, teacher: Any = None):
        cfg = trainer.config
        self.cfg, self.teacher, self.records_dir = cfg, teacher, Path(records_dir)
        self.learner_name = trainer.learner.name
        self.tokenizer = lifecycle.tokenizer_of(trainer.learner)
        self.template_kwargs = template_kwargs_of(trainer.learner)
        per_instance, self.game_roles = training_slots(cfg.game_list, split_list(cfg.roles), cfg.train_instances,
                                                                 cfg.train_items)
        self.slots = [slot for slots in per_instance for slot in slots]
        # forks need different continuations: greedy decoding means the default temperature 1.0
        sampling = SamplingConfig.from_gen_args(getattr(trainer.learner, "gen_args", None))
        self.sampling = replace(sampling, temperature=sampling.temperature or 1.0)
        self.seed = trainer.seed
        self.rng = random.Random(trainer.seed)
        self.callbacks = trainer.callbacks
        self.last_metrics: dict[str, float] = {}

    def log_episodes_to(self, run_dir: Path) -> None:
        """Also write every played episode to the run's JSON log (as GRPO runs do)."""
        self.callbacks = CallbackList([self.callbacks, JsonlLogCallback(Path(run_dir) / LOG_FILE)])

    def __call__(self, round_: int, policy: Any) -> list[PreferencePair]:
        """The round's pairs. In a data-parallel run every rank plays its share of the sampled
        instances and gets every rank's pairs back (in rank order: the same list on every rank)."""
        cfg = self.cfg
        learner = Learner(policy, self.tokenizer, self.learner_name, self.sampling, self.template_kwargs)
        episodes, stats = [], []
        for role in dict.fromkeys(s.role for s in self.slots):
            instances = list(dict.fromkeys(s.instance for s in self.slots if s.role == role))
            if cfg.pair_instances and len(instances) > cfg.pair_instances:
                instances = self.rng.sample(instances, cfg.pair_instances)
            instances = distributed.shard(instances)  # every rank draws the same sample (seeded)
            for turn in cfg.turns:
                branching = Branching(factor=cfg.branches, condition=_fork_at(role, turn), max_depth=1)
                for game in dict.fromkeys(i[0] for i in instances):
                    partners = None if self.teacher is None else \
                        {r: self.teacher for r in self.game_roles[game] if r != role}
                    result = rollout(
                        game, learner, roles=None if self.teacher is None else [role], partners=partners,
                        instances=[InstanceRef(*i) for i in instances if i[0] == game],
                        instances_file=cfg.train_instances, branching=branching,
                        max_concurrent_episodes=cfg.max_concurrent_episodes, records_dir=self.records_dir,
                        callbacks=self.callbacks, seed=self.seed * 100003 + round_ * 101 + turn)
                    episodes += result.episodes
                    stats.append(result.stats)
        pairs = [p for part in distributed.gather_objects(branch_pairs(episodes)) for p in part]
        summary = _summary(distributed.gather_objects(_episode_summary(episodes, stats)))
        self.last_metrics = _metrics(summary, len(pairs))
        if not pairs:
            outcomes = Counter(summary["outcomes"])
            raise DatasetError(f"round {round_}: no preference pairs: the branches of every fork tied "
                               f"({len(summary['outcomes'])} episodes: "
                               f"{', '.join(f'{n} {o}' for o, n in outcomes.items())}); "
                               f"start from an adapter that plays the game sometimes (--init-adapter), or raise "
                               f"--branches / --pair-instances")
        return pairs


def _fork_at(role: str, turn: int):
    def condition(point) -> bool:
        return point.learner_turn == turn and role in (point.role, point.player_name)
    return condition


def _episode_summary(episodes: list, stats: list) -> dict:
    """What the round's metrics need of one rank's episodes (small: gathered over ranks)."""
    return {"outcomes": [e.outcome for e in episodes],
            "rewards": [t.reward for e in episodes for t in e.trajectories if not math.isnan(t.reward)],
            "forks": sorted({e.group_id for e in episodes if "@" in e.group_id}),
            "seconds": sum(s.seconds_total for s in stats)}


def _summary(parts: list[dict]) -> dict:
    return {"outcomes": [o for p in parts for o in p["outcomes"]], "rewards": [r for p in parts for r in p["rewards"]],
            "forks": sorted({f for p in parts for f in p["forks"]}), "seconds": sum(p["seconds"] for p in parts)}


def _metrics(summary: dict, num_pairs: int) -> dict[str, float]:
    outcomes, rewards, forks, seconds = (summary[k] for k in ("outcomes", "rewards", "forks", "seconds"))
    return {"rollout/episodes": len(outcomes),
            "rollout/percent_played": 100.0 * sum(o in ("success", "failure") for o in outcomes)
            / max(1, len(outcomes)),
            "rollout/reward_mean": sum(rewards) / len(rewards) if rewards else math.nan,
            "rollout/seconds": seconds, "pairs/forks": len(forks),
            "pairs/per_fork": num_pairs / len(forks) if forks else 0.0}


def pair_source(trainer, records_dir: Path, run_dir: Path, teacher: Any = None):
    """``(make_pairs, collection_metrics)`` of the trainer's ``--source``."""
    cfg = trainer.config
    if cfg.source == "branching":
        collector = BranchCollector(trainer, records_dir, teacher)
        collector.log_episodes_to(run_dir)
        return collector, lambda: collector.last_metrics
    if cfg.source == "records":
        return (lambda round_, policy: records_pairs(cfg)), None
    return (lambda round_, policy: read_pairs(cfg.pairs_file)), None
