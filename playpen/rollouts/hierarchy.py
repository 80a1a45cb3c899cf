"""Episodes that contain episodes: a parent episode starts sub-episodes through the rollout
engine and its reward waits for their results (docs/hierarchical.md).

A :class:`HierarchicalTask` names its **levels** (each a game, who plays it, whether it is
trained) and says, for a finished episode, which sub-episodes it starts
(:meth:`HierarchicalTask.spawn`) and, once they have ended, what the parent's players are
rewarded (:meth:`HierarchicalTask.rewards`)::

    class ProposerSolver(HierarchicalTask):
        levels = {"proposer": Level("arith_proposer"), "solver": Level("arith_solver")}

        def spawn(self, parent):
            problem = parent.interactions.get("Problem")
            return [SubEpisodes("solver", {"problem": problem}, num=4)] if problem else []

        def rewards(self, parent, children):
            ...

    result = rollout_hierarchy(ProposerSolver(), learner, instances_file="instances_train")

Every episode of every level runs in ONE lock-step loop of :mod:`playpen.rollouts.loop`:
sub-episodes join the running batch as slots free up, so the learner's turns of parents,
children and unrelated episodes are generated together. A sub-episode is an episode of
its own: its own folder in clemcore's layout (``clem score`` scores it), its own GRPO
group (the ``num`` episodes of one request share a group id), its own outcome — one that
fails (game code raising, a prompt over the context window) fails only itself, and the
task's :meth:`~HierarchicalTask.rewards` decides what the parent gets from the others.

Links, in ``episode.json`` (paths relative to the run folder): every episode has
``hierarchy`` = ``{"level", "level_name", "episode_type", "trainable", "policy_version",
"parent"}``; a parent's gets ``"children"`` (each ``{"episode_id", "path", "outcome"}``),
and its ``rewards`` become the task's (the game's stay in ``game_rewards``) when its last
sub-episode has ended. Trajectories carry ``level``, ``episode_type``, ``trainable`` and
``policy_version``; :attr:`HierarchyResult.nodes` holds the links in memory.
"""
from __future__ import annotations

import dataclasses
import json
import math
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping, Optional, Sequence, Union

from playpen.errors import RolloutError
from playpen.files import finite, write_json
from playpen.rollouts.lockstep import _Loop, learner_stand_in, loop_stats, open_run, run_loop
from playpen.rollouts.partners import as_partner
from playpen.rollouts.plan import check_keys_used, pending_episodes, plan_game
from playpen.rollouts.types import LEARNER, EpisodeResult, InstanceSelector, Learner, PartnerLike, RolloutResult, \
    RolloutStats, Trajectory


@dataclass(frozen=True)
class Level:
    """One level of a hierarchy: the game its episodes play and who plays it.

    ``roles``/``partners`` as in :func:`playpen.rollouts.rollout` (None and empty: the
    learner plays every role). ``trainable`` False marks the level's trajectories as played
    but not to be trained (e.g. frozen solvers). ``episode_type`` names the kind of
    episode for credit assignment (default: the game name)."""

    game: str
    roles: Optional[Sequence[str]] = None
    partners: Mapping[str, PartnerLike] = field(default_factory=dict)
    trainable: bool = True
    episode_type: str = ""


@dataclass(frozen=True)
class SubEpisodes:
    """A parent's request: ``num`` episodes of level ``level`` on one game instance (a GRPO
    group). ``instance`` needs no ``game_id`` (the engine numbers sub-episode instances);
    ``experiment`` is the experiment they are recorded under (a name and the parameters the
    game reads)."""

    level: str
    instance: Mapping[str, Any]
    num: int = 1
    experiment: Mapping[str, Any] = field(default_factory=lambda: {"name": "spawned"})


@dataclass(frozen=True)
class ParentEpisode:
    """What :meth:`HierarchicalTask.spawn` and :meth:`~HierarchicalTask.rewards` see of a
    finished episode: its result (the game's rewards), the keys its game master logged
    (``interactions.json``; empty when it failed) and its level's name."""

    result: EpisodeResult
    interactions: Mapping[str, Any]
    level: str


class HierarchicalTask:
    """Subclass it: ``levels`` (name -> :class:`Level`; the first is the top level, whose
    instances :func:`rollout_hierarchy` plays), :meth:`spawn` and :meth:`rewards`."""

    levels: ClassVar[Mapping[str, Level]] = {}

    def spawn(self, parent: ParentEpisode) -> Sequence[SubEpisodes]:
        """The sub-episodes a finished episode starts (default: none). Not called for an
        episode that failed with an error."""
        return ()

    def rewards(self, parent: ParentEpisode, children: Sequence[EpisodeResult]) -> Optional[Mapping[str, float]]:
        """The parent's rewards per player name once all its sub-episodes have ended
        (``children`` in request order; failed ones have ``outcome == "error"``); None keeps
        the game's. A player left out keeps the game's reward."""
        return None


@dataclass(frozen=True)
class Node:
    """An episode's place in the hierarchy."""

    episode_id: str
    level: int
    level_name: str
    episode_type: str
    trainable: bool
    parent_id: Optional[str] = None
    children: tuple[str, ...] = ()
    path: Optional[str] = None  # relative to the run folder


@dataclass(frozen=True)
class HierarchyResult:
    """The episodes of every level (parents before their children) and their links."""

    rollout: RolloutResult
    nodes: Mapping[str, Node]

    @property
    def episodes(self) -> tuple[EpisodeResult, ...]:
        return self.rollout.episodes

    @property
    def run_dir(self) -> Optional[Path]:
        return self.rollout.run_dir

    @property
    def stats(self) -> RolloutStats:
        return self.rollout.stats

    @property
    def trajectories(self) -> list[Trajectory]:
        return self.rollout.trajectories

    def at_level(self, level: Union[int, str]) -> list[EpisodeResult]:
        """The episodes of a level (its depth or its name)."""
        return [e for e in self.episodes if level in (self.nodes[e.episode_id].level,
                                                      self.nodes[e.episode_id].level_name)]

    def children_of(self, episode_id: str) -> list[EpisodeResult]:
        by_id = {e.episode_id: e for e in self.episodes}
        return [by_id[c] for c in self.nodes[episode_id].children]


def rollout_hierarchy(task: HierarchicalTask, learner: Learner, *,
                      instances: InstanceSelector = None, instances_file: Optional[str] = None,
                      num_repeats: int = 1, max_concurrent_episodes: int = 16,
                      reward_fn: Optional[Callable] = None,
                      records_dir: Optional[Union[str, Path]] = "playpen-records", run_name: Optional[str] = None,
                      callbacks: Any = None, seed: Optional[int] = None, policy_version: int = 0,
                      raise_game_errors: bool = False, kv_cache_mb: float = 1024.0) -> HierarchyResult:
    """Play the top level's instances (``instances``/``instances_file``/``num_repeats`` as in
    :func:`playpen.rollouts.rollout`) and every sub-episode they start, in one loop.
    ``policy_version``: the optimizer step of ``learner``'s weights, stamped on every
    trajectory (see :mod:`playpen.training.grpo.offpolicy`). Sub-episodes of lower levels read
    their game's rows from ``instances_file`` only to learn the roles. ``kv_cache_mb``: as in
    :func:`~playpen.rollouts.rollout`."""
    started = time.perf_counter()
    levels = dict(task.levels)
    if not levels:
        raise RolloutError(f"{type(task).__name__} declares no levels")
    if num_repeats < 1 or max_concurrent_episodes < 1:
        raise RolloutError(f"num_repeats and max_concurrent_episodes must be >= 1, got {num_repeats}, "
                           f"{max_concurrent_episodes}")
    template_kwargs = dict(getattr(learner, "template_kwargs", {}) or {})
    learner_model = learner_stand_in(learner, template_kwargs)
    partners: list = []
    plans: dict[str, Any] = {}
    try:
        for depth, (name, level) in enumerate(levels.items()):
            objects = {key: as_partner(value, sampling=learner.sampling) for key, value in level.partners.items()}
            partners += [p for p in objects.values() if p is not LEARNER]
            for partner in objects.values():
                if partner is not LEARNER:
                    partner.check()
            plan = plan_game(level.game, learner_model, objects, level.roles, instances if depth == 0 else None,
                             instances_file)
            plans[name] = plan
            check_keys_used([plan], level.roles, objects)
        if len({plan.name for plan in plans.values()}) < len(plans):
            raise RolloutError(f"{type(task).__name__}: two levels play the same game; give each level its own game")
        top = next(iter(levels))
        pending = pending_episodes([plans[top]], instances, num_repeats)
        writer = open_run(records_dir, run_name, seed)
        setup_seconds = time.perf_counter() - started
        loop = _TreeLoop(task, levels, plans, policy_version, learner, template_kwargs, None,
                         max_concurrent_episodes, reward_fn, writer, callbacks, raise_game_errors, kv_cache_mb)
        run_loop(loop, list(plans.values()), pending, writer, callbacks)
    finally:
        for plan in plans.values():
            plan.benchmark.close()
        for partner in {id(p): p for p in partners}.values():
            partner.close()
    results = tuple(result for _, result in sorted(loop.finished, key=lambda e: e[0]))
    stats = loop_stats(loop, started, setup_seconds)
    return HierarchyResult(RolloutResult(results, stats, writer.run_dir if writer is not None else None),
                           dict(loop.nodes))


class _TreeLoop(_Loop):
    """The rollout loop, with sub-episodes admitted as slots free up and parents'
    results held back until their sub-episodes have ended."""

    def __init__(self, task, levels, plans, policy_version, *args):
        super().__init__(*args)
        self.task, self.levels, self.plans, self.policy_version = task, levels, plans, policy_version
        self.depth = {name: i for i, name in enumerate(levels)}
        self.spawned: deque = deque()  # (order, plan, row, repeat) of sub-episodes not yet admitted
        self.node_info: dict[tuple, tuple[str, Optional[str], Optional[str]]] = {}  # order -> level, parent
        self.live: set[int] = set()  # episodes set up and not yet ended
        self.nodes: dict[str, Node] = {}
        self.waiting: dict[str, dict] = {}  # parent episode id -> its held result and children
        self.next_game_id: dict[tuple, int] = {}

    def run(self, pending: list[tuple]) -> None:
        batch = list(pending)
        while batch:  # sub-episodes started in the last step of a pass run in the next
            super().run(batch)
            batch, self.spawned = list(self.spawned), deque()

    def _new(self, order, plan, row, repeat):
        episode = super()._new(order, plan, row, repeat)
        level, parent_id, parent_path = self.node_info.get(order, (next(iter(self.levels)), None, None))
        spec = self.levels[level]
        episode.meta = {"hierarchy": dict(
            level=self.depth[level], level_name=level, episode_type=spec.episode_type or plan.name,
            trainable=spec.trainable, policy_version=self.policy_version,
            parent=None if parent_id is None else {"episode_id": parent_id, "path": parent_path})}
        return episode

    def _reset(self, episodes):
        room = self.max_concurrent - len(self.live) - len(episodes)
        while self.spawned and room > 0:
            episodes = [*episodes, self._new(*self.spawned.popleft())]
            room -= 1
        started = super()._reset(episodes)
        self.live.update(id(e) for e in started)
        return started

    def _record(self, episode, result: EpisodeResult) -> None:
        self.live.discard(id(episode))
        info = episode.meta["hierarchy"]
        if result.path is not None and self.writer is not None:
            path = str(Path(result.path).relative_to(self.writer.run_dir))
        else:
            path = None
        node = Node(result.episode_id, info["level"], info["level_name"], info["episode_type"],
                    info["trainable"], (info["parent"] or {}).get("episode_id"), (), path)
        result = dataclasses.replace(result, trajectories=tuple(
            dataclasses.replace(t, level=node.level, episode_type=node.episode_type, trainable=node.trainable,
                                policy_version=self.policy_version) for t in result.trajectories))
        self.nodes[node.episode_id] = node
        view = ParentEpisode(result, _logged_keys(episode) if result.error is None else {}, node.level_name)
        requests = list(self.task.spawn(view)) if result.error is None else []
        if requests:
            self._start_children(episode, node, view, requests)
        else:
            self._done(episode, result)

    def _start_children(self, episode, node: Node, view: ParentEpisode, requests: list) -> None:
        children = []
        for index, request in enumerate(requests):
            if request.level not in self.levels:
                raise RolloutError(f"{type(self.task).__name__}.spawn asked for level '{request.level}'; "
                                   f"levels: {', '.join(self.levels)}")
            if request.num < 1:
                raise RolloutError(f"{type(self.task).__name__}.spawn asked for {request.num} episodes")
            plan = self.plans[request.level]
            experiment = dict(request.experiment)
            key = (plan.name, experiment["name"])
            game_id = self.next_game_id.get(key, 0)
            self.next_game_id[key] = game_id + 1
            row = {"experiment": experiment, "game_instance": {**dict(request.instance), "game_id": game_id}}
            for repeat in range(request.num):
                order = (*episode.order, index, repeat)
                self.node_info[order] = (request.level, node.episode_id, node.path)
                children.append(f"{plan.name}/{experiment['name']}/{game_id}/r{repeat}")
                self.spawned.append((order, plan, row, repeat))
        self.nodes[node.episode_id] = dataclasses.replace(node, children=tuple(children))
        self.waiting[node.episode_id] = {"episode": episode, "view": view, "results": {}}

    def _done(self, episode, result: EpisodeResult) -> None:
        super()._record(episode, result)
        parent_id = self.nodes[result.episode_id].parent_id
        if parent_id is None:
            return
        held = self.waiting[parent_id]
        held["results"][result.episode_id] = result
        parent = self.nodes[parent_id]
        if len(held["results"]) < len(parent.children):
            return
        del self.waiting[parent_id]
        children = [held["results"][c] for c in parent.children]
        self._done(held["episode"], self._resolve(held["view"], parent, children))

    def _resolve(self, view: ParentEpisode, node: Node, children: list[EpisodeResult]) -> EpisodeResult:
        """The parent's result with the task's rewards; its episode.json completed."""
        given = self.task.rewards(view, children)
        rewards = dict(view.result.rewards)
        rewards.update({k: float(v) for k, v in (given or {}).items()})
        result = dataclasses.replace(view.result, rewards=rewards, trajectories=tuple(
            dataclasses.replace(t, reward=rewards.get(t.player_name, math.nan))
            for t in view.result.trajectories))
        if result.path is not None:
            meta_file = Path(result.path) / "episode.json"
            meta = json.loads(meta_file.read_text(encoding="utf-8"))
            meta["game_rewards"], meta["rewards"] = meta.get("rewards"), rewards
            meta["hierarchy"]["children"] = [
                {"episode_id": c.episode_id, "path": self.nodes[c.episode_id].path, "outcome": c.outcome}
                for c in children]
            write_json(meta_file, finite(meta), sync=True)
        return result

def _logged_keys(episode) -> dict:
    """The keys the game master logged with ``log_key`` (top level of interactions.json)."""
    interactions = episode.env.interactions if episode.env.interactions_recorder is not None else {}
    return {k: v for k, v in interactions.items() if k not in ("meta", "players", "turns")}
