"""The rollout engine's entry point, :func:`rollout` (its lock-step loop:
:mod:`playpen.rollouts.lockstep`).

Each iteration: admit queued episodes up to the concurrency limit; observe every
running episode; fork those at a branching point; group the pending turns by
responder; start concurrent partners (API models) in the background; run ONE
batched generate for all learner turns; answer the other groups (one batched call
each); then step every game master and retire finished episodes. Game code runs through
:func:`playpen.rollouts.steps.run_steps`, so model calls a master makes inside a step
(side calls) are batched across episodes too and recorded (:mod:`playpen.rollouts.sidecalls`).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence, Union

from playpen.callbacks import BaseCallback
from playpen.errors import RolloutError
from playpen.rollouts.lockstep import _Loop, learner_stand_in, loop_stats, open_run, run_loop
from playpen.rollouts.partners import as_partner
from playpen.rollouts.plan import check_keys_used, pending_episodes, plan_game
from playpen.rollouts.types import LEARNER, Branching, InstanceSelector, Learner, PartnerLike, RolloutResult


def rollout(games: Union[str, Sequence[str]],
            learner: Learner,
            *,
            roles: Optional[Sequence[str]] = None,
            partners: Optional[Mapping[str, PartnerLike]] = None,
            instances: InstanceSelector = None, instances_file: Optional[str] = None,
            num_repeats: int = 1,
            branching: Optional[Branching] = None,
            max_concurrent_episodes: int = 16,
            reward_fn: Optional[Callable] = None,
            records_dir: Optional[Union[str, Path]] = "playpen-records",
            run_name: Optional[str] = None,
            callbacks: Optional[BaseCallback] = None,
            seed: Optional[int] = None,
            raise_game_errors: bool = False, augment: bool = False, augment_variants: int = 0,
            kv_cache_mb: float = 1024.0, max_turns: Optional[int] = None) -> RolloutResult:
    """Play ``len(instances) * num_repeats`` episodes (plus branches) and return them.

    Args:
        games: game names (resolved with playpen's registry: workspace
            ``game_registry.json``, packaged games, the working directory).
        learner: the model being trained; its roles produce :class:`Trajectory` objects.
        roles: game roles (``player.game_role``, e.g. ``"WordDescriber"``) or player names
            (``"Player 1"``) the learner plays. None: every role not in ``partners``.
        partners: role (or player name) -> partner for the other roles (see
            :data:`PartnerLike`). Roles in neither ``roles`` nor ``partners`` are played
            by the learner (self-play) when ``roles`` is None, else it is an error.
        instances: which instances to play (see :data:`InstanceSelector`).
        instances_file: stem of the instances file in each game's ``in/`` folder
            (e.g. ``"instances_train"``); default: the game's own (``instances``).
        num_repeats: episodes per instance (independent; same group_id).
        branching: fork episodes at learner turns (GRPO groups, DPO pairs, trees).
        max_concurrent_episodes: running episodes at once (the batch size of the
            learner's generate when all of them wait for it).
        reward_fn: ``(EpisodeOutcome, player_name, role) -> float``; default
            :class:`playpen.rewards.OutcomeReward`.
        records_dir: parent of the new run folder with clemcore-layout records; None
            writes nothing.
        run_name: name of the run folder (default: ``rollout-<time>-<random>``); an
            existing folder is never reused (PlaypenError).
        callbacks: ``on_rollout_start(num_episodes)``, ``on_episode_end(summary)``,
            ``on_rollout_end()``.
        seed: seeds torch's sampling for this call (None: leave RNG state alone).
        raise_game_errors: re-raise an exception from game code (default: record the
            episode as ``outcome="error"`` with ``error.json`` and go on).
        augment: play each episode's instance as the game's ``augment_instance`` rewrites it (seeded).
        augment_variants: with ``augment``, 0: every episode its own draw; N > 0: the repeats of an
            instance share N draws (repeat r plays draw r mod N), so that episodes of the same draw
            share their prompts (a GRPO step runs a shared prompt once: ``--share-prompts``).
        kv_cache_mb: most megabytes of KV cache kept between the learner's turns (each
            running conversation continues its cache and prefills only its new tokens;
            least recently used caches are evicted beyond this and re-prefilled when
            needed); 0 turns the cache off (every turn prefills its whole prompt). Tokens
            and logprobs are those of the uncached path up to floating-point noise.
        max_turns: an episode still running after this many turns (steps) ends as aborted, with a
            note in its interactions (a game that never ends with this model); None: the
            process's limit (``playpen run --max-turns``; by default each game's own,
            :func:`playpen.envs.turns.game_turn_limit`), 0: no limit.
    """
    started = time.perf_counter()
    if num_repeats < 1:
        raise RolloutError(f"num_repeats must be >= 1, got {num_repeats}")
    if augment_variants < 0:
        raise RolloutError(f"augment_variants must be >= 0 (0: a draw per episode), got {augment_variants}")
    if max_concurrent_episodes < 1:
        raise RolloutError(f"max_concurrent_episodes must be >= 1, got {max_concurrent_episodes}")
    if not kv_cache_mb >= 0:
        raise RolloutError(f"kv_cache_mb must be >= 0 (0: no cache kept between turns), got {kv_cache_mb}")
    if max_turns is not None and (type(max_turns) is not int or max_turns < 0):
        raise RolloutError(f"max_turns must be an integer >= 0 (0: no limit), got {max_turns!r}")
    if branching is not None and branching.factor < 1:
        raise RolloutError(f"branching factor must be >= 1, got {branching.factor}")
    game_names = [games] if isinstance(games, str) else list(games)
    if not game_names:
        raise RolloutError("no games given")
    partner_objects = {key: as_partner(value, sampling=learner.sampling)
                       for key, value in dict(partners or {}).items()}
    for partner in {id(p): p for p in partner_objects.values() if p is not LEARNER}.values():
        partner.check()
    template_kwargs = dict(getattr(learner, "template_kwargs", {}) or {})
    learner_model = learner_stand_in(learner, template_kwargs)
    plans = []
    try:
        for name in game_names:
            plans.append(plan_game(name, learner_model, partner_objects, roles, instances, instances_file))
        check_keys_used(plans, roles, partner_objects)
        pending = pending_episodes(plans, instances, num_repeats, (seed or 0) if augment else None,
                                   augment_variants)
        writer = open_run(records_dir, run_name, seed)
        setup_seconds = time.perf_counter() - started
        loop = _Loop(learner, template_kwargs, branching, max_concurrent_episodes, reward_fn, writer,
                     callbacks, raise_game_errors, kv_cache_mb, max_turns)
        run_loop(loop, plans, pending, writer, callbacks)
    finally:
        for plan in plans:
            plan.benchmark.close()
        for partner in {id(p): p for p in partner_objects.values() if p is not LEARNER}.values():
            partner.close()
    episodes = tuple(sorted(loop.finished, key=lambda e: e[0]))
    results = tuple(result for _, result in episodes)
    stats = loop_stats(loop, started, setup_seconds)
    if branching is not None and loop.branch_points < len(pending):
        # e.g. episodes that ended before any learner turn: fewer episodes than asked for
        print(f"[playpen] branching: {loop.branch_points} branch point(s) found in {len(pending)} episode(s); "
              f"an episode without one (it ended before a learner turn the condition chose) is not forked",
              file=sys.stderr, flush=True)
    return RolloutResult(results, stats, writer.run_dir if writer is not None else None)
