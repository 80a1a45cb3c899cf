"""The lock-step loop behind :func:`playpen.rollouts.rollout` (and the hierarchical
rollouts' loop, which extends it).

Each iteration: admit queued episodes up to the concurrency limit; observe every
running episode; fork those at a branching point; group the pending turns by
responder; start concurrent partners (API models) in the background; run ONE
batched generate for all learner turns (adapter players on the learner's model in the
same call, a row per adapter); answer the other groups (one batched call each); then
step every game master and retire finished episodes. Game code runs through
:func:`playpen.rollouts.steps.run_steps`, so model calls a master makes inside a step
(side calls) are batched across episodes too and recorded (:mod:`playpen.rollouts.sidecalls`).
"""
from __future__ import annotations

import concurrent.futures
import logging
import math
import time
from collections import deque
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Optional

from playpen.envs.game import GameEnv
from playpen.errors import ContextOverflowError
from playpen.inference import engine
from playpen.inference.kvcache import KVCacheStore, PrefillCounts
from playpen.inference.model_facts import context_limit
from playpen.rollouts import chat
from playpen.rollouts.buffers import TokenBuffer
from playpen.rollouts.episodes import Episode
from playpen.rollouts.partners import GAME_PLAYERS, TurnRequest, generated_response, stand_in_model
from playpen.rollouts.plan import GamePlan
from playpen.rollouts.records import RunWriter
from playpen.rollouts.sidecalls import SideCallServer
from playpen.rollouts.steps import run_steps, side_call
from playpen.rollouts.types import LEARNER, BranchPoint, EpisodeResult, Learner, RolloutStats, TurnRecord


def learner_stand_in(learner: Learner, template_kwargs: dict):
    """The clemcore Model a game master holds for the learner's player: the loop answers its
    turns; a master calling it itself is a side call (:func:`_direct_learner_call` outside steps)."""
    return stand_in_model(
        learner.name, lambda messages: side_call(
            LEARNER, messages, lambda m: _direct_learner_call(learner, m, template_kwargs)),
        gen_args=dict(temperature=learner.sampling.temperature, max_tokens=learner.sampling.max_new_tokens),
        backend="huggingface_local")


def open_run(records_dir, run_name, seed) -> Optional[RunWriter]:
    """The run's records folder (None: no records) and torch's sampling seeded (None: left alone)."""
    writer = RunWriter(records_dir, run_name) if records_dir is not None else None
    if seed is not None:
        import torch  # heavy: importing playpen.rollouts (and its torch-free types) stays torch-free
        torch.manual_seed(seed)
    return writer


def loop_stats(loop, started: float, setup_seconds: float) -> RolloutStats:
    """What the loop counted, with the call's wall clock since ``started``."""
    results = [result for _, result in loop.finished]
    total = time.perf_counter() - started
    clock = loop.clock
    return RolloutStats(num_episodes=len(results), num_errors=sum(r.error is not None for r in results),
                        num_learner_turns=clock.learner_turns, num_generated_tokens=clock.tokens,
                        num_generate_calls=clock.calls, num_side_calls=loop.side_calls.num_calls,
                        seconds_total=total, seconds_setup=setup_seconds,
                        seconds_generate=clock.generate, seconds_partners=clock.partners,
                        seconds_env=max(0.0, total - setup_seconds - clock.generate - clock.partners),
                        num_prefill_tokens=clock.prefill.prefilled, num_reused_tokens=clock.prefill.reused,
                        num_branch_points=loop.branch_points)


def run_loop(loop, plans, pending: list, writer, callbacks) -> None:
    """Run ``loop`` over ``pending`` with the rollout's bookkeeping around it: each game's
    results folder started, the writer closed and ``on_rollout_end`` called however it ends."""
    if callbacks is not None:
        callbacks.on_rollout_start(len(pending))
    try:
        if writer is not None:
            for plan in plans:
                writer.start_game(plan.model_dir, plan.name, plan.spec.game_path, plan.model_infos,
                                  plan.spec.instances)
        loop.run(pending)
    finally:
        if writer is not None:
            writer.close()
        if callbacks is not None:
            callbacks.on_rollout_end()


def _direct_learner_call(learner: Learner, messages: list[dict], template_kwargs: dict):
    """A game master calling the learner's player outside the loop's steps: generate once,
    unrecorded (inside steps, :class:`SideCallServer` batches and records them)."""
    prompt = chat.prompt_ids(learner.tokenizer, messages, template_kwargs)
    gen = engine.generate(learner.model, learner.tokenizer, [prompt], learner.sampling)[0]
    return ({"inputs": learner.tokenizer.decode(prompt)}, {"response": learner.tokenizer.decode(gen.token_ids)},
            gen.text)


# ----------------------------------------------------------------------------- loop

@dataclass
class _Turn:
    episode: Episode
    player: Any
    context: dict
    messages: list[dict]
    responder: Any
    prompt_ids: Optional[list[int]] = None


class _Clock:
    """Where the loop's time went (seconds) and what the models produced."""

    def __init__(self):
        self.generate = 0.0
        self.partners = 0.0
        self.tokens = 0
        self.calls = 0
        self.learner_turns = 0
        self.prefill = PrefillCounts()  # the learner's turns

    def partner_answered(self, partner, elapsed: float, responses) -> None:
        """Count a partner's batch: generation time for a model, partner time for a program."""
        if getattr(partner, "generates", False):
            self.generate += elapsed
            self.calls += 1
            self.tokens += sum(r.num_new_tokens for r in responses)
        else:
            self.partners += elapsed


class _Loop:
    def __init__(self, learner, template_kwargs, branching, max_concurrent, reward_fn, writer, callbacks,
                 raise_game_errors, kv_cache_mb: float = 0.0, max_turns: Optional[int] = None):
        self.learner = learner
        self.template_kwargs = template_kwargs
        self.branching = branching
        self.max_concurrent = max_concurrent
        self.reward_fn = reward_fn
        self.writer = writer
        self.callbacks = callbacks
        self.raise_game_errors = raise_game_errors
        self.max_turns = max_turns  # per episode (playpen.envs.turns; None: the process's limit)
        self.clock = _Clock()
        self.side_calls = SideCallServer(learner, template_kwargs, self.clock)
        self.finished: list[tuple[tuple, EpisodeResult]] = []
        self.branch_points = 0
        # conversations' KV caches between turns, valid while the weights stay as they are
        self.kv_cache = KVCacheStore(int(kv_cache_mb * 2**20)) if kv_cache_mb > 0 else None
        self._pool: Optional[concurrent.futures.ThreadPoolExecutor] = None

    def run(self, pending: list[tuple]) -> None:
        queue = deque(pending)
        active: list[Episode] = []
        try:
            while queue or active:
                admitted = []
                while queue and len(active) + len(admitted) < self.max_concurrent:
                    admitted.append(self._new(*queue.popleft()))
                active += self._reset(admitted)
                if not active:
                    continue
                turns = self._collect(active)
                self._answer(turns)
                active = [e for e in active if not (e.failed or e.env.done)]
        finally:
            if self.kv_cache is not None:
                self.kv_cache.clear()
            if self._pool is not None:
                self._pool.shutdown(wait=True)

    # ------------------------------------------------------------------ episodes
    def _new(self, order, plan: GamePlan, row: dict, repeat: int) -> Episode:
        env = GameEnv(plan.benchmark, plan.player_models, reward_fn=self.reward_fn, results_folder=plan.model_dir,
                      max_turns=self.max_turns)
        gid = int(row["game_instance"]["game_id"])
        base_id = f"{plan.name}/{row['experiment']['name']}/{gid}/r{repeat}"
        return Episode(order, plan, row, repeat, env, base_id, group_id=f"{plan.name}/{row['experiment']['name']}/{gid}")

    def _reset(self, episodes: list[Episode]) -> list[Episode]:
        """Set the episodes' games up (game code: side calls batched); those that fail are recorded."""
        calls = [(e, lambda e=e: e.env.reset(e.row["experiment"], e.row["game_instance"])) for e in episodes]
        started = []
        for job in run_steps(calls, self.side_calls):
            if job.error is not None:
                self._fail(job.key, job.error)
            else:
                started.append(job.key)
        return started

    def _fork(self, episode: Episode, player_name: str, learner_turn: int) -> list[Episode]:
        factor = self.branching.factor
        self.branch_points += 1
        node_id = episode.episode_id
        group_id = f"{node_id}@{player_name}#{learner_turn}"
        children = []
        for index in range(1, factor):
            env = episode.env.fork()
            child = Episode(episode.order, episode.plan, episode.row, episode.repeat, env, episode.base_id,
                             group_id, episode.branch_path + (index,), node_id, episode.depth + 1,
                             {k: b.copy() for k, b in episode.buffers.items()}, dict(episode.learner_turns),
                             list(episode.turns), *episode.copy_side_calls())
            children.append(child)
        episode.branch_path += (0,)
        episode.parent_id, episode.group_id, episode.depth = node_id, group_id, episode.depth + 1
        return children

    def _collect(self, active: list[Episode]) -> list[_Turn]:
        turns: list[_Turn] = []
        for episode in list(active):
            player, context = episode.env.observe()
            responder = episode.plan.responders.get(player.name)
            if responder is None:
                responder = GAME_PLAYERS  # a player the game built itself
            if responder is LEARNER and self.branching is not None:
                count = episode.learner_turns.get(player.name, 0)
                point = BranchPoint(episode.plan.name, episode.row["experiment"]["name"],
                                    int(episode.row["game_instance"]["game_id"]), player.name,
                                    player.game_role, count, episode.depth)
                if episode.depth < self.branching.max_depth and self.branching.factor > 1 \
                        and self.branching.condition(point):
                    try:
                        children = self._fork(episode, player.name, count)
                    except Exception as e:  # deep-copying game state is game code too
                        self._fail(episode, e)
                        active.remove(episode)
                        continue
                    active.extend(children)
                    for child in children:
                        turns.append(self._turn(child, responder))
            turns.append(self._turn(episode, responder))
        return turns

    @staticmethod
    def _turn(episode: Episode, responder) -> _Turn:
        # perceive first, as clemcore's Player does: programmatic players read their memory
        player, context = episode.env.observe()
        messages = [*player.get_perspective(), context]
        episode.env.perceive()
        return _Turn(episode, player, context, messages, responder)

    # ------------------------------------------------------------------ answering
    def _answer(self, turns: list[_Turn]) -> None:
        # the learner and the adapter players (partners with a peft adapter) generate token-exact;
        # those on one model object share one generate (per-row adapter names)
        learner_turns = [t for t in turns if t.responder is LEARNER or _adapter_player(t.responder)]
        groups: dict[int, tuple[Any, list[_Turn]]] = {}
        for turn in turns:
            if turn.responder is not LEARNER and not _adapter_player(turn.responder):
                groups.setdefault(id(turn.responder), (turn.responder, []))[1].append(turn)
        answers: dict[int, Any] = {}
        background = {}
        for key, (partner, group) in groups.items():
            if getattr(partner, "concurrent", False):
                if self._pool is None:
                    self._pool = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="partners")
                requests = [TurnRequest(t.player, t.context, tuple(t.messages)) for t in group]
                background[key] = (time.perf_counter(), self._pool.submit(partner.respond, requests))
        batches: dict[tuple, list[_Turn]] = {}
        for turn in learner_turns:
            player = self._player(turn.responder)
            batches.setdefault((id(player.model), player.sampling, player.adapter is None), []).append(turn)
        for batch in batches.values():
            self._generate_learner(batch, answers)
        for key, (partner, group) in groups.items():
            if key in background:
                continue
            started = time.perf_counter()
            responses = partner.respond([TurnRequest(t.player, t.context, tuple(t.messages)) for t in group])
            self.clock.partner_answered(partner, time.perf_counter() - started, responses)
            for turn, response in zip(group, responses):
                answers[id(turn)] = response
        background_joined = time.perf_counter()
        for key, (started, future) in background.items():
            partner, group = groups[key]
            responses = future.result()  # re-raises PartnerError
            # the part of the partners' time not hidden behind the learner's generate
            self.clock.partners += max(0.0, time.perf_counter() - background_joined)
            for turn, response in zip(group, responses):
                answers[id(turn)] = response
        self._step(turns, answers)

    def _player(self, responder) -> Learner:
        """Who generates for ``responder``: the learner, or an adapter player (an HFTeacher)."""
        return self.learner if responder is LEARNER else responder.as_learner()

    def _generate_learner(self, turns: list[_Turn], answers: dict) -> None:
        """One generate for ``turns``: the learner's, or those of players on one model and
        sampling (each row with its player's adapter)."""
        players = [self._player(t.responder) for t in turns]
        learner = players[0]
        prompts = []
        for turn, player in zip(turns, players):
            buffer = turn.episode.buffers.setdefault(turn.player.name, TokenBuffer())
            kwargs = self.template_kwargs if turn.responder is LEARNER else dict(player.template_kwargs)
            prompts.append(buffer.prepare(player.tokenizer, turn.messages, kwargs))
        adapters = None if learner.adapter is None else [p.adapter for p in players]
        started, call_start = time.perf_counter(), datetime.now()
        # the context window: a prompt that fills it fails its episode; one that leaves less
        # room than max_new_tokens is generated with the room left (cut, as at max_new_tokens)
        generations, calls = engine.generate_within(
            learner.model, learner.tokenizer, prompts, learner.sampling, adapter_names=adapters,
            cache=self.kv_cache, conversations=[(id(t.episode), t.player.name) for t in turns],
            counts=self.clock.prefill)
        self.clock.generate += time.perf_counter() - started
        self.clock.calls += calls
        duration = str(datetime.now() - call_start)
        for turn, player, prompt, gen in zip(turns, players, prompts, generations):
            if gen is None:
                answers[id(turn)] = None  # never applied: the episode has failed
                limit = context_limit(learner.model, learner.tokenizer)
                self._fail(turn.episode, ContextOverflowError(
                    f"the prompt of {turn.player.name} ({turn.player.game_role}) has {len(prompt)} tokens; "
                    f"{player.name}'s context window holds {limit}: the episode cannot go on (use a model "
                    f"with a longer context, or fewer/shorter turns)"))
                continue
            if turn.responder is LEARNER:
                self.clock.learner_turns += 1
            self.clock.tokens += len(gen.token_ids)
            buffer = turn.episode.buffers[turn.player.name]
            buffer.add_generation(gen.token_ids, gen.logprobs, gen.text)
            turn.episode.learner_turns[turn.player.name] = turn.episode.learner_turns.get(turn.player.name, 0) + 1
            answers[id(turn)] = generated_response(player.tokenizer, prompt, gen, player.sampling, player.name,
                                                   call_start, duration)

    def _step(self, turns: list[_Turn], answers: dict) -> None:
        """Give every answer to its game master (game code, run by :func:`run_steps`)."""
        calls = []
        for turn in turns:
            episode, response = turn.episode, answers[id(turn)]
            if episode.failed:
                continue
            kind = "learner" if turn.responder is LEARNER else getattr(turn.responder, "kind", "teacher")
            episode.turns.append(TurnRecord(turn.player.name, turn.player.game_role, kind,
                                            turn.context.get("content", ""), response.text, response.num_new_tokens))
            calls.append((episode, lambda env=episode.env, response=response: env.step(response)))
        for job in run_steps(calls, self.side_calls):
            if job.error is not None:
                self._fail(job.key, job.error)
            elif job.result.done:
                self._finish(job.key)

    # ------------------------------------------------------------------ finishing
    def _free(self, episode: Episode) -> None:
        """Free the KV caches of an episode that has ended."""
        if self.kv_cache is not None:
            for name in episode.buffers:
                self.kv_cache.drop((id(episode), name))

    def _finish(self, episode: Episode) -> None:
        self._free(episode)
        self._check_continuity(episode)
        result = episode.env.last_result
        path = episode.write(self.writer, self.learner.name, outcome=result.outcome,
                             main_score=result.main_score, rewards=result.rewards, error=None)
        self._record(episode, episode.result(
            outcome=result.outcome, main_score=result.main_score, rewards=result.rewards,
            trajectories=episode.trajectories(result, self.learner.name),
            episode_scores=result.episode_scores, path=path))

    def _check_continuity(self, episode: Episode) -> None:
        """The conversations the model generated turn by turn (the learner's, and the adapter
        players' that population trainers train) against a fresh render of them: one line per
        game and role whose template breaks the prefix (:func:`chat.warn_once_if_discontinuous`;
        after the first check of a game and role this is a set lookup)."""
        for player_name, buffer in episode.buffers.items():
            responder = episode.plan.responders.get(player_name, LEARNER)
            player = self._player(responder)
            kwargs = self.template_kwargs if responder is LEARNER else dict(player.template_kwargs)
            for *_, seen in buffer.segments():
                chat.warn_once_if_discontinuous(player.tokenizer, player.name, episode.plan.name,
                                                episode.plan.roles.get(player_name, player_name), seen, kwargs)

    def _fail(self, episode: Episode, error: Exception) -> None:
        if self.raise_game_errors:
            raise error
        episode.failed = True
        self._free(episode)
        message = f"{type(error).__name__}: {error}"
        logging.getLogger(__name__).warning("episode %s failed: %s", episode.episode_id, message)
        path = episode.write(self.writer, self.learner.name, outcome="error", main_score=math.nan,
                             rewards={}, error=error)
        self._record(episode, episode.result(outcome="error", main_score=math.nan, rewards={}, path=path,
                                             error=message))

    def _record(self, episode: Episode, result: EpisodeResult) -> None:
        self.finished.append(((episode.order, episode.branch_path), result))
        if self.callbacks is not None:
            self.callbacks.on_episode_end(result.summary())


def _adapter_player(responder) -> bool:
    """A partner that is an adapter player: generated token-exact, batched per model object."""
    return getattr(responder, "adapter", None) is not None and hasattr(responder, "as_learner")
