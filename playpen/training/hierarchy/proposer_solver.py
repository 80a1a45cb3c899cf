"""The proposer-solver hierarchy (games ``arith_proposer`` and ``arith_solver``) as a
:class:`~playpen.rollouts.hierarchy.HierarchicalTask`, its instance store, and the TRL
``rollout_func`` of :class:`~playpen.training.hierarchy.trainer.HierarchicalGRPOTrainer`.

Level 0, ``proposer``: the Proposer writes a problem from its instance's numbers. Level 1,
``solver``: ``num_solvers`` episodes of ``arith_solver`` on that problem (one GRPO group).
The Proposer's reward is ``1 - |2 r - 1|``, ``r`` the share of its solver episodes won
(:func:`proposer_reward`; see the game's README for errors and aborts). A proposal without
a valid problem keeps the game's reward (aborted or lost) and its solver slots are filled
from the instance store (problems earlier proposers got half-solved), else from the
solver game's training instances, so every step trains as many solver groups.
"""
from __future__ import annotations

import math
import random
from typing import Any, Callable, Mapping, Optional, Sequence

from playpen.envs.loading import game_instance_rows
from playpen.registry import game_spec
from playpen.rollouts import InstanceRef, Learner
from playpen.rollouts.hierarchy import HierarchicalTask, Level, ParentEpisode, SubEpisodes, rollout_hierarchy
from playpen.rollouts.types import EpisodeResult
from playpen.training.grpo.rollout_bridge import Slot, _pick, append_row
from playpen.training.grpo.watch import PolicyWatch

PROPOSER_GAME = "arith_proposer"
SOLVER_GAME = "arith_solver"
PROPOSER, SOLVER = "Proposer", "Solver"
PROPOSED, FROM_STORE = "proposed", "store"  # the experiments solver episodes are recorded under


def solve_rate(children: Sequence[EpisodeResult]) -> Optional[float]:
    """The share of solver episodes won; episodes that failed with an error (not the
    solver's doing) are left out; aborted ones count as not solved. None: none usable."""
    usable = [c for c in children if c.outcome != "error"]
    if not usable:
        return None
    return sum(c.outcome == "success" for c in usable) / len(usable)


def proposer_reward(rate: Optional[float]) -> float:
    """1 - |2 r - 1|: 1 when half of the solvers solve the problem, 0 when all or none do;
    NaN (unscored) without a usable solver episode."""
    return math.nan if rate is None else 1.0 - abs(2.0 * rate - 1.0)


class ProposerSolverTask(HierarchicalTask):
    """Proposer -> ``num_solvers`` solver episodes -> the proposer's reward.

    Args:
        num_solvers: solver episodes per problem.
        solver: who solves: ``"learner"`` or a partner (``"programmatic"``, a model name, ...).
        train_solvers: whether the solver level's trajectories are trained.
        store: an :class:`~playpen.training.hierarchy.instance_store.InstanceStore` for problems of
            proposals without a valid one (None: the fallback problems only).
        fallback: problems to use when the store is empty.
        rng: the draws from the store and the fallback.
        proposer: who proposes (``"learner"`` or a partner).
    """

    def __init__(self, num_solvers: int = 4, solver: Any = "learner", train_solvers: bool = True,
                 store: Any = None, fallback: Sequence[str] = (), rng: Optional[random.Random] = None,
                 proposer: Any = "learner"):
        partners = {} if solver == "learner" else {SOLVER: solver}
        self.levels = {"proposer": Level(PROPOSER_GAME, partners={} if proposer == "learner"
                                         else {PROPOSER: proposer}),
                       "solver": Level(SOLVER_GAME, partners=partners, trainable=train_solvers)}
        self.num_solvers, self.store, self.fallback = num_solvers, store, list(fallback)
        self.rng = rng or random.Random(0)
        self.problems: dict[str, str] = {}  # proposer episode id -> its valid problem
        self.rates: dict[str, Optional[float]] = {}  # proposer episode id -> its solvers' solve rate

    def spawn(self, parent: ParentEpisode) -> list[SubEpisodes]:
        if parent.level != "proposer":
            return []
        valid = parent.interactions.get("Panel Solve Rate") is not None
        if valid:
            problem = parent.interactions["Problem"]
            self.problems[parent.result.episode_id] = problem
            return [SubEpisodes("solver", {"problem": problem}, self.num_solvers, {"name": PROPOSED})]
        drawn = self.store.sample(self.rng) if self.store is not None else []
        problem = drawn[0]["problem"] if drawn else (self.rng.choice(self.fallback) if self.fallback else None)
        if problem is None:
            return []
        return [SubEpisodes("solver", {"problem": problem}, self.num_solvers, {"name": FROM_STORE})]

    def rewards(self, parent: ParentEpisode, children: Sequence[EpisodeResult]):
        if parent.result.episode_id not in self.problems:
            return None  # no valid problem: the game's reward (aborted / lost) stands
        name = next(n for n, role in parent.result.roles.items() if role == PROPOSER)
        self.rates[parent.result.episode_id] = rate = solve_rate(children)
        return {name: proposer_reward(rate)}

    def keep(self, result, step: int) -> int:
        """Put the problems of ``result`` (a HierarchyResult) that its solvers found neither
        trivial nor impossible into the store, weighted by the proposer's reward; returns
        how many were kept."""
        kept = 0
        for parent in result.at_level("proposer"):
            problem, rate = self.problems.get(parent.episode_id), self.rates.get(parent.episode_id)
            if self.store is not None and rate is not None and 0.0 < rate < 1.0:
                kept += self.store.add({"problem": problem}, proposer_reward(rate), step=step,
                                       meta={"solve_rate": rate, "episode_id": parent.episode_id})
        return kept


def solver_problems(instances_file: str, items: Optional[Mapping[str, list]] = None) -> list[str]:
    """The problems of the solver game's instances file (the store's fallback; `items`: a
    ``--split``'s items per game, where it names the solver game)."""
    chosen = None if items is None else items.get(SOLVER_GAME)
    return [row["game_instance"]["problem"]
            for row in game_instance_rows(game_spec(SOLVER_GAME, instances_file), chosen)]


# ----------------------------------------------------------------------------- TRL rollout_func

def slot_rows(per_instance: list, num_steps: int, solver_slots: int, seed: int) -> list[dict]:
    """Dataset prompts: per step one proposer slot (a training instance, shuffled by seed)
    followed by ``solver_slots`` solver slots (the solver groups of its proposals)."""
    rng = random.Random(seed)
    rows: list[dict] = []
    order: list = []
    while len(rows) < num_steps * (1 + solver_slots):
        if not order:
            order = list(per_instance)
            rng.shuffle(order)
        game, experiment, game_id = order.pop()
        rows.append({"prompt": Slot(game, experiment, game_id, PROPOSER).to_prompt()})
        rows += [{"prompt": Slot(SOLVER_GAME, PROPOSED, k, SOLVER).to_prompt()} for k in range(solver_slots)]
    return rows


class HierarchicalRollout:
    """TRL ``rollout_func`` of hierarchical GRPO on proposer-solver.

    A generation batch is proposer slots, each followed by its solver slots (see
    :func:`slot_rows`); each proposer slot is played ``num_generations`` times and each
    proposal starts ``num_generations`` solver episodes, all in one hierarchical rollout.
    Rows: the proposals' Proposer trajectories (one group), then per solver slot the
    Solver trajectories of one proposal (one group each). Every row carries its level,
    group id and policy version for the credit assignment and the off-policy guard."""

    def __init__(self, learner_name: str, tokenizer: Any, *, num_generations: int, solver: Any,
                 train_solvers: bool, sampling: Any, records_dir: Any, store: Any, store_path: Any,
                 instances: str, items: Optional[Mapping[str, list]] = None, seed: int = 0, reward_fn: Optional[Callable] = None,
                 max_concurrent_episodes: int = 32, callbacks: Any = None, rubric: Any = None,
                 learning_rate: float = 0.0):
        self.learner_name, self.tokenizer, self.num_generations = learner_name, tokenizer, num_generations
        self.solver, self.train_solvers, self.sampling = solver, train_solvers, sampling
        self.records_dir, self.store, self.store_path = records_dir, store, store_path
        self.instances, self.seed, self.reward_fn = instances, seed, reward_fn
        self.max_concurrent_episodes, self.callbacks = max_concurrent_episodes, callbacks
        self.rubric = rubric  # --rubric: its game's episodes (one level) rescored after the rollout
        self.fallback = solver_problems(instances, items)
        self.last_rows: dict[str, list] = {}
        self.last_metrics: dict[str, float] = {}
        self.watch = PolicyWatch(learning_rate, sampling=sampling)  # do the rollouts come from the weights being trained?

    def __call__(self, prompts: list, trainer: Any) -> dict[str, list]:
        size = self.num_generations
        if len(prompts) % size:
            raise ValueError(f"rollout_func got {len(prompts)} prompts, not a multiple of {size}")
        slots = [Slot.from_prompt(prompts[i]) for i in range(0, len(prompts), size)]
        proposer_slots = [s for s in slots if s.role == PROPOSER]
        step = int(getattr(getattr(trainer, "state", None), "global_step", 0) or 0)
        model = getattr(trainer, "model_wrapped", None) or trainer.model
        learner = Learner(model, self.tokenizer, self.learner_name, self.sampling)
        task = ProposerSolverTask(size, self.solver, self.train_solvers, self.store, self.fallback,
                                  random.Random(f"{self.seed}/{step}"))
        result = rollout_hierarchy(
            task, learner, instances=[InstanceRef(*s.instance) for s in proposer_slots],
            instances_file=self.instances, num_repeats=size, max_concurrent_episodes=self.max_concurrent_episodes,
            reward_fn=self.reward_fn, records_dir=self.records_dir, callbacks=self.callbacks,
            seed=self.seed * 100003 + step, policy_version=step)
        watched = self.watch.check(model, step)  # after the rollout: what vLLM was handed for it
        rubric_metrics = {}
        if self.rubric is not None:  # after the task's rewards: a "reward" term reads the proposer's
            from dataclasses import replace
            result = replace(result, rollout=self.rubric.apply(result.rollout, policy=model))
            rubric_metrics = self.rubric.last_scores.metrics()
        kept = task.keep(result, step)
        if self.store is not None and self.store_path is not None:
            self.store.save(self.store_path)
        out = self._rows(slots, result, step)
        self.last_rows = {k: out[k] for k in ("reward", "role", "game", "level", "group_id", "policy_version",
                                              "logprobs")}
        self.last_metrics = {**result.stats.as_metrics(), **self._metrics(result, task, out), "store/kept": kept,
                             "store/size": len(self.store) if self.store is not None else 0, **rubric_metrics,
                             **watched}
        return out

    def _rows(self, slots, result, step: int) -> dict[str, list]:
        keys = ("prompt_ids", "completion_ids", "logprobs", "env_mask", "reward", "outcome", "main_score", "role",
                "game", "level", "group_id", "policy_version")
        out: dict[str, list] = {k: [] for k in keys}
        proposals: list = []
        for slot in slots:
            if slot.role == PROPOSER:
                played = [e for e in result.at_level("proposer") if (e.game, e.experiment, e.game_id) == slot.instance]
                proposals = played[:self.num_generations]
                for episode in proposals:
                    self._row(out, episode, PROPOSER, 0, step)
            else:
                children = result.children_of(proposals[slot.game_id].episode_id) if slot.game_id < len(proposals) \
                    else []
                if len(children) != self.num_generations:
                    raise RuntimeError(f"solver slot {slot.game_id}: {len(children)} solver episodes for a group of "
                                       f"{self.num_generations}")
                for episode in children:
                    self._row(out, episode, SOLVER, 1, step)
        return out

    def _row(self, out: dict, episode: EpisodeResult, role: str, level: int, step: int) -> None:
        trajectory = _pick(episode, role)
        # no turn of the learner (a partner played it, or the episode failed before it) or a
        # level not trained: no tokens to learn from, no reward in any mean
        append_row(out, trajectory if trajectory is not None and trajectory.trainable else None,
                   self.tokenizer.eos_token_id)
        out["outcome"].append(episode.outcome)
        out["main_score"].append(float(episode.main_score))
        out["role"].append(role)
        out["game"].append(episode.game)
        out["level"].append(level)
        out["group_id"].append(episode.group_id)
        out["policy_version"].append(step)

    @staticmethod
    def _metrics(result, task: ProposerSolverTask, out: dict) -> dict[str, float]:
        metrics: dict[str, float] = {}
        by: dict[tuple, list[float]] = {}
        for reward, role, level in zip(out["reward"], out["role"], out["level"]):
            if not math.isnan(reward):
                by.setdefault((level, role), []).append(reward)
        for (level, role), values in by.items():
            metrics[f"reward/{level}/{role}/mean"] = sum(values) / len(values)
        proposals = result.at_level("proposer")
        metrics["hierarchy/valid_problems"] = len(task.problems) / len(proposals) if proposals else 0.0
        usable = [r for r in task.rates.values() if r is not None]
        if usable:
            metrics["hierarchy/solve_rate"] = sum(usable) / len(usable)
        solvers = result.at_level("solver")
        if solvers:
            metrics["hierarchy/solver_success"] = sum(e.outcome == "success" for e in solvers) / len(solvers)
        return metrics


def proposer_instances(instances_file: str, items: Optional[Mapping[str, list]] = None) -> list[tuple[str, str, int]]:
    """(game, experiment, game_id) of every proposer training instance (`items`: a ``--split``'s
    items per game, where it names the proposer game)."""
    chosen = None if items is None else items.get(PROPOSER_GAME)
    return [(PROPOSER_GAME, row["experiment"]["name"], int(row["game_instance"]["game_id"]))
            for row in game_instance_rows(game_spec(PROPOSER_GAME, instances_file), chosen)]
