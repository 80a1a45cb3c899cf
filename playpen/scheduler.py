"""The lock-step loop behind :func:`playpen.rollout.rollout`.

Each iteration: admit queued episodes up to the concurrency limit; observe every
running episode; fork those at a branching point; group the pending turns by
responder; start concurrent partners (API models) in the background; run ONE
batched generate for all learner turns; answer the other groups (one batched call
each); then step every game master and retire finished episodes.
"""
from __future__ import annotations

import concurrent.futures
import copy
import math
import time
from collections import deque
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Optional, Sequence

from playpen.callbacks import BaseCallback
from playpen.errors import PlaypenError
from playpen.rollout import (LEARNER, BranchPoint, Branching, EpisodeResult, InstanceRef, Learner,
                             RolloutResult, RolloutStats, Trajectory, TurnRecord)


class RolloutError(PlaypenError):
    """Bad rollout arguments: unknown roles or instances, nobody for a role."""


class ContextOverflowError(PlaypenError):
    """A learner prompt does not fit the model's context window (the episode fails)."""


# ----------------------------------------------------------------------------- token buffers

@dataclass
class TokenBuffer:
    """The learner's token-exact view of one player's conversation (one segment at a time)."""

    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    seen: list[dict] = field(default_factory=list)  # messages the model has seen, raw
    last_token: Optional[int] = None
    num_turns: int = 0
    segment: int = 0
    closed: list[tuple] = field(default_factory=list)  # earlier segments (history rewritten)

    def prepare(self, tokenizer, messages: Sequence[dict], template_kwargs: dict) -> list[int]:
        """Extend the sequence with the environment tokens for ``messages`` (the player's
        memory + new context); returns the ids to generate from."""
        from playpen import chat
        messages = [{"role": m["role"], "content": m["content"]} for m in messages]
        if self.prompt_ids and messages[:len(self.seen)] == self.seen and len(messages) > len(self.seen):
            delta = chat.continuation_ids(tokenizer, messages[len(self.seen):], self.last_token,
                                          template_kwargs)
            self.completion_ids += delta
            self.env_mask += [0] * len(delta)
            self.logprobs += [0.0] * len(delta)
        else:
            if self.prompt_ids:  # the game rewrote the history: start a new segment
                self.closed.append(self._snapshot())
                self.segment += 1
                self.completion_ids, self.env_mask, self.logprobs = [], [], []
                self.num_turns = 0
            self.prompt_ids = chat.prompt_ids(tokenizer, messages, template_kwargs)
        self.seen = messages
        return self.prompt_ids + self.completion_ids

    def add_generation(self, token_ids: Sequence[int], logprobs: Sequence[float], text: str) -> None:
        self.completion_ids += token_ids
        self.env_mask += [1] * len(token_ids)
        self.logprobs += logprobs
        self.seen = self.seen + [{"role": "assistant", "content": text}]
        self.last_token = token_ids[-1] if token_ids else None
        self.num_turns += 1

    def _snapshot(self) -> tuple:
        return (self.segment, tuple(self.prompt_ids), tuple(self.completion_ids), tuple(self.env_mask),
                tuple(self.logprobs), self.num_turns, tuple(dict(m) for m in self.seen))

    def segments(self) -> list[tuple]:
        return [*self.closed, self._snapshot()] if self.prompt_ids else list(self.closed)

    def copy(self) -> "TokenBuffer":
        return copy.deepcopy(self)


# ----------------------------------------------------------------------------- plans

@dataclass
class _GamePlan:
    """One game: its benchmark, who plays which slot, and the model folder name."""

    name: str
    spec: Any
    benchmark: Any
    rows: list[dict]
    responders: dict[str, Any]  # player name -> LEARNER | Partner
    roles: dict[str, str]  # player name -> role
    player_models: list
    model_dir: str
    model_infos: dict


@dataclass
class _Episode:
    order: tuple
    plan: _GamePlan
    row: dict
    repeat: int
    env: Any
    base_id: str
    group_id: str
    branch_path: tuple[int, ...] = ()
    parent_id: Optional[str] = None
    depth: int = 0
    buffers: dict[str, TokenBuffer] = field(default_factory=dict)
    learner_turns: dict[str, int] = field(default_factory=dict)
    turns: list[TurnRecord] = field(default_factory=list)
    failed: bool = False

    @property
    def episode_id(self) -> str:
        if not self.branch_path:
            return self.base_id
        return f"{self.base_id}/b{'.'.join(str(i) for i in self.branch_path)}"


@dataclass
class _Turn:
    episode: _Episode
    player: Any
    context: dict
    messages: list[dict]
    responder: Any
    prompt_ids: Optional[list[int]] = None


class _Clock:
    def __init__(self):
        self.generate = 0.0
        self.partners = 0.0
        self.tokens = 0
        self.calls = 0
        self.learner_turns = 0


# ----------------------------------------------------------------------------- entry

def run_rollout(games, learner: Learner, *, roles=None, partners=None, instances=None, instances_file=None,
                num_repeats=1,
                branching: Optional[Branching] = None, max_concurrent_episodes=16, reward_fn=None,
                records_dir="playpen-records", run_name=None, callbacks: Optional[BaseCallback] = None,
                seed=None, raise_game_errors=False) -> RolloutResult:
    started = time.perf_counter()
    if num_repeats < 1:
        raise RolloutError(f"num_repeats must be >= 1, got {num_repeats}")
    if max_concurrent_episodes < 1:
        raise RolloutError(f"max_concurrent_episodes must be >= 1, got {max_concurrent_episodes}")
    if branching is not None and branching.factor < 1:
        raise RolloutError(f"branching factor must be >= 1, got {branching.factor}")
    game_names = [games] if isinstance(games, str) else list(games)
    if not game_names:
        raise RolloutError("no games given")
    from playpen.teachers import as_partner, stand_in_model
    partner_objects = {key: as_partner(value, sampling=learner.sampling)
                       for key, value in dict(partners or {}).items()}
    for partner in {id(p): p for p in partner_objects.values() if p is not LEARNER}.values():
        partner.check()
    template_kwargs = dict(getattr(learner, "template_kwargs", {}) or {})
    learner_model = stand_in_model(
        learner.name, lambda messages: _direct_learner_call(learner, messages, template_kwargs),
        gen_args=dict(temperature=learner.sampling.temperature, max_tokens=learner.sampling.max_new_tokens),
        backend="huggingface_local")
    plans = []
    try:
        for name in game_names:
            plans.append(_plan_game(name, learner_model, partner_objects, roles, instances, instances_file))
        _check_keys_used(plans, roles, partner_objects)
        pending = _pending_episodes(plans, instances, num_repeats)
        writer = None
        if records_dir is not None:
            from playpen.records import RunWriter
            writer = RunWriter(records_dir, run_name)
        if seed is not None:
            import torch
            torch.manual_seed(seed)
        setup_seconds = time.perf_counter() - started
        loop = _Loop(learner, template_kwargs, branching, max_concurrent_episodes, reward_fn, writer,
                     callbacks, raise_game_errors)
        if callbacks is not None:
            callbacks.on_rollout_start(len(pending))
        try:
            if writer is not None:
                for plan in plans:
                    writer.start_game(plan.model_dir, plan.name, plan.spec.game_path, plan.model_infos)
            loop.run(pending)
        finally:
            if writer is not None:
                writer.close()
            if callbacks is not None:
                callbacks.on_rollout_end()
    finally:
        for plan in plans:
            plan.benchmark.close()
        for partner in {id(p): p for p in partner_objects.values() if p is not LEARNER}.values():
            partner.close()
    episodes = tuple(sorted(loop.finished, key=lambda e: e[0]))
    results = tuple(result for _, result in episodes)
    total = time.perf_counter() - started
    clock = loop.clock
    stats = RolloutStats(num_episodes=len(results), num_errors=sum(r.error is not None for r in results),
                         num_learner_turns=clock.learner_turns, num_generated_tokens=clock.tokens,
                         num_generate_calls=clock.calls, seconds_total=total, seconds_setup=setup_seconds,
                         seconds_generate=clock.generate, seconds_partners=clock.partners,
                         seconds_env=max(0.0, total - setup_seconds - clock.generate - clock.partners))
    return RolloutResult(results, stats, writer.run_dir if writer is not None else None)


def _direct_learner_call(learner: Learner, messages: list[dict], template_kwargs: dict):
    """A game master calling the learner's player directly: generate once, outside trajectories."""
    from playpen import chat, generation
    prompt = chat.prompt_ids(learner.tokenizer, messages, template_kwargs)
    gen = generation.generate(learner.model, learner.tokenizer, [prompt], learner.sampling)[0]
    return ({"inputs": learner.tokenizer.decode(prompt)}, {"response": learner.tokenizer.decode(gen.token_ids)},
            gen.text)


def _plan_game(name, learner_model, partner_objects, roles, instances, instances_file) -> _GamePlan:
    from playpen.envs.loading import game_instance_rows, game_spec, load_benchmark, probe_roles
    spec = game_spec(name)
    if instances_file is not None:
        folder = Path(spec.game_path) / "in"
        if not (folder / f"{instances_file}.json").exists():
            found = sorted(p.stem for p in folder.glob("*.json"))
            raise RolloutError(f"game '{name}' has no in/{instances_file}.json (instance files: "
                               f"{', '.join(found) or 'none'})")
        spec.instances = instances_file
    benchmark = load_benchmark(spec)
    try:
        rows = game_instance_rows(spec)
        if callable(instances):
            rows = [r for r in rows if instances(r)]
        if not rows:
            raise RolloutError(f"game '{name}': no instances selected")
        slots, own = probe_roles(benchmark, rows[0])
        responders, role_of, models = {}, {}, [None] * int(spec.players)
        for slot in slots:
            keys = (slot.role, slot.player_name)
            partner = next((partner_objects[k] for k in keys if k in partner_objects), None)
            if partner is None or partner is LEARNER:
                if partner is None and roles is not None and not any(k in roles for k in keys):
                    raise RolloutError(f"game '{name}': nobody plays role '{slot.role}' "
                                       f"({slot.player_name}): add it to roles or partners")
                responders[slot.player_name] = LEARNER
                models[slot.index] = learner_model
            else:
                responders[slot.player_name] = partner
                models[slot.index] = partner.clem_model()
            role_of[slot.player_name] = slot.role
        for player_name, role in own:
            role_of[player_name] = role
        if any(m is None for m in models):
            raise RolloutError(f"game '{name}': could not map every player slot to a role "
                               f"(slots {[s.player_name for s in slots]})")
        from playpen.clem import clemcore
        model_cls = clemcore().backends.Model
        names = [m.name for m in models]
        model_dir = model_cls.to_identifier(models if len(set(names)) > 1 else models[:1])
        infos = model_cls.to_infos(models)
        return _GamePlan(spec.game_name, spec, benchmark, rows, responders, role_of, models, model_dir, infos)
    except BaseException:
        benchmark.close()
        raise


def _check_keys_used(plans, roles, partner_objects) -> None:
    known = sorted({v for plan in plans for item in plan.roles.items() for v in item})
    for key in [*(roles or []), *partner_objects]:
        if key not in known:
            from playpen.registry import close_matches
            raise RolloutError(f"unknown role or player '{key}'.{close_matches(key, known)} "
                               f"Roles and players of {', '.join(p.name for p in plans)}: {', '.join(known)}")


def _pending_episodes(plans, instances, num_repeats) -> list[tuple]:
    """(order, plan, row, repeat) in request order."""
    out = []
    if instances is not None and not callable(instances):
        by_name = {plan.name: plan for plan in plans}
        seen: dict[tuple, int] = {}
        for index, ref in enumerate(instances):
            if not isinstance(ref, InstanceRef):
                ref = InstanceRef(*ref)
            plan = by_name.get(ref.game)
            if plan is None:
                raise RolloutError(f"instance {ref}: game '{ref.game}' is not among the games "
                                   f"{sorted(by_name)}")
            row = next((r for r in plan.rows if r["experiment"]["name"] == ref.experiment
                        and int(r["game_instance"]["game_id"]) == int(ref.game_id)), None)
            if row is None:
                raise RolloutError(f"instance {ref}: no such experiment/game_id in {plan.name}'s instances")
            key = (ref.game, ref.experiment, int(ref.game_id))
            for _ in range(num_repeats):
                repeat = seen.get(key, 0)
                seen[key] = repeat + 1
                out.append(((index, repeat), plan, row, repeat))
        return out
    index = 0
    for plan in plans:
        for row in plan.rows:
            for repeat in range(num_repeats):
                out.append(((index, repeat), plan, row, repeat))
            index += 1
    return out


# ----------------------------------------------------------------------------- loop

class _Loop:
    def __init__(self, learner, template_kwargs, branching, max_concurrent, reward_fn, writer, callbacks,
                 raise_game_errors):
        self.learner = learner
        self.template_kwargs = template_kwargs
        self.branching = branching
        self.max_concurrent = max_concurrent
        self.reward_fn = reward_fn
        self.writer = writer
        self.callbacks = callbacks
        self.raise_game_errors = raise_game_errors
        self.clock = _Clock()
        self.finished: list[tuple[tuple, EpisodeResult]] = []
        self._pool: Optional[concurrent.futures.ThreadPoolExecutor] = None

    def run(self, pending: list[tuple]) -> None:
        queue = deque(pending)
        active: list[_Episode] = []
        try:
            while queue or active:
                while queue and len(active) < self.max_concurrent:
                    episode = self._start(*queue.popleft())
                    if episode is not None:
                        active.append(episode)
                if not active:
                    continue
                turns = self._collect(active)
                self._answer(turns)
                active = [e for e in active if not (e.failed or e.env.done)]
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)

    # ------------------------------------------------------------------ episodes
    def _start(self, order, plan: _GamePlan, row: dict, repeat: int) -> Optional[_Episode]:
        from playpen.envs.game import GameEnv
        env = GameEnv(plan.benchmark, plan.player_models, reward_fn=self.reward_fn, results_folder=plan.model_dir)
        gid = int(row["game_instance"]["game_id"])
        base_id = f"{plan.name}/{row['experiment']['name']}/{gid}/r{repeat}"
        episode = _Episode(order, plan, row, repeat, env, base_id, group_id=f"{plan.name}/{row['experiment']['name']}/{gid}")
        try:
            env.reset(row["experiment"], row["game_instance"])
        except Exception as e:  # game code
            self._fail(episode, e)
            return None
        return episode

    def _fork(self, episode: _Episode, player_name: str, learner_turn: int) -> list[_Episode]:
        factor = self.branching.factor
        node_id = episode.episode_id
        group_id = f"{node_id}@{player_name}#{learner_turn}"
        children = []
        for index in range(1, factor):
            env = episode.env.fork()
            child = _Episode(episode.order, episode.plan, episode.row, episode.repeat, env, episode.base_id,
                             group_id, episode.branch_path + (index,), node_id, episode.depth + 1,
                             {k: b.copy() for k, b in episode.buffers.items()}, dict(episode.learner_turns),
                             list(episode.turns))
            children.append(child)
        episode.branch_path += (0,)
        episode.parent_id, episode.group_id, episode.depth = node_id, group_id, episode.depth + 1
        return children

    def _collect(self, active: list[_Episode]) -> list[_Turn]:
        turns: list[_Turn] = []
        for episode in list(active):
            player, context = episode.env.observe()
            responder = episode.plan.responders.get(player.name)
            if responder is None:
                responder = _OWN_PLAYER
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
    def _turn(episode: _Episode, responder) -> _Turn:
        # perceive first, as clemcore's Player does: programmatic players read their memory
        player, context = episode.env.observe()
        messages = [*player.get_perspective(), context]
        episode.env.perceive()
        return _Turn(episode, player, context, messages, responder)

    # ------------------------------------------------------------------ answering
    def _answer(self, turns: list[_Turn]) -> None:
        from playpen.teachers import TurnRequest
        learner_turns = [t for t in turns if t.responder is LEARNER]
        groups: dict[int, tuple[Any, list[_Turn]]] = {}
        for turn in turns:
            if turn.responder is not LEARNER:
                groups.setdefault(id(turn.responder), (turn.responder, []))[1].append(turn)
        answers: dict[int, Any] = {}
        background = {}
        for key, (partner, group) in groups.items():
            if getattr(partner, "concurrent", False):
                if self._pool is None:
                    self._pool = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="partners")
                requests = [TurnRequest(t.player, t.context, tuple(t.messages)) for t in group]
                background[key] = (time.perf_counter(), self._pool.submit(partner.respond, requests))
        if learner_turns:
            self._generate_learner(learner_turns, answers)
        for key, (partner, group) in groups.items():
            if key in background:
                continue
            started = time.perf_counter()
            responses = partner.respond([TurnRequest(t.player, t.context, tuple(t.messages)) for t in group])
            elapsed = time.perf_counter() - started
            if getattr(partner, "generates", False):
                self.clock.generate += elapsed
                self.clock.calls += 1
                self.clock.tokens += sum(r.num_new_tokens for r in responses)
            else:
                self.clock.partners += elapsed
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
        for turn in turns:
            self._apply(turn, answers[id(turn)])

    def _generate_learner(self, turns: list[_Turn], answers: dict) -> None:
        from playpen import generation
        from playpen.teachers import TurnResponse
        learner = self.learner
        prompts = []
        for turn in turns:
            buffer = turn.episode.buffers.setdefault(turn.player.name, TokenBuffer())
            prompts.append(buffer.prepare(learner.tokenizer, turn.messages, self.template_kwargs))
        # the context window: a prompt that fills it fails its episode; one that leaves less
        # room than max_new_tokens is generated with the room left (cut, as at max_new_tokens)
        limit = generation.context_limit(learner.model, learner.tokenizer)
        wanted = learner.sampling.max_new_tokens
        budgets: dict[int, list[int]] = {}
        for i, (turn, prompt) in enumerate(zip(turns, prompts)):
            room = wanted if limit is None else min(wanted, limit - len(prompt))
            if room < 1:
                answers[id(turn)] = None  # never applied: the episode has failed
                self._fail(turn.episode, ContextOverflowError(
                    f"the prompt of {turn.player.name} ({turn.player.game_role}) has {len(prompt)} tokens; "
                    f"{learner.name}'s context window holds {limit}: the episode cannot go on (use a model "
                    f"with a longer context, or fewer/shorter turns)"))
                continue
            budgets.setdefault(room, []).append(i)
        started = time.perf_counter()
        call_start = datetime.now()
        generations: list = [None] * len(turns)
        for room, rows in sorted(budgets.items(), reverse=True):
            sampling = learner.sampling if room == wanted else replace(learner.sampling, max_new_tokens=room)
            for i, gen in zip(rows, generation.generate(learner.model, learner.tokenizer,
                                                        [prompts[i] for i in rows], sampling)):
                generations[i] = gen
            self.clock.calls += 1
        elapsed = time.perf_counter() - started
        self.clock.generate += elapsed
        self.clock.learner_turns += sum(len(rows) for rows in budgets.values())
        duration = str(datetime.now() - call_start)
        for turn, prompt, gen in zip(turns, prompts, generations):
            if gen is None:
                continue
            self.clock.tokens += len(gen.token_ids)
            buffer = turn.episode.buffers[turn.player.name]
            buffer.add_generation(gen.token_ids, gen.logprobs, gen.text)
            turn.episode.learner_turns[turn.player.name] = turn.episode.learner_turns.get(turn.player.name, 0) + 1
            answers[id(turn)] = TurnResponse(
                gen.text,
                prompt={"inputs": learner.tokenizer.decode(prompt), "max_new_tokens": learner.sampling.max_new_tokens,
                        "temperature": learner.sampling.temperature, "num_prompt_tokens": len(prompt)},
                response_object={"response": learner.tokenizer.decode(gen.token_ids), "finished": gen.finished,
                                 "num_new_tokens": len(gen.token_ids),
                                 "clem_player": {"call_start": str(call_start), "call_duration": duration,
                                                 "response": gen.text, "model_name": learner.name}},
                num_new_tokens=len(gen.token_ids))

    def _apply(self, turn: _Turn, response) -> None:
        episode = turn.episode
        if episode.failed:
            return
        kind = "learner" if turn.responder is LEARNER else getattr(turn.responder, "kind", "teacher")
        episode.turns.append(TurnRecord(turn.player.name, turn.player.game_role, kind,
                                        turn.context.get("content", ""), response.text, response.num_new_tokens))
        try:
            result = episode.env.step(response.text, prompt=response.prompt,
                                      response_object=dict(response.response_object))
        except Exception as e:  # game code
            self._fail(episode, e)
            return
        if result.done:
            self._finish(episode)

    # ------------------------------------------------------------------ finishing
    def _trajectories(self, episode: _Episode, result) -> tuple[Trajectory, ...]:
        from playpen.chat import strip_system
        out = []
        row = episode.row
        for player_name, buffer in episode.buffers.items():
            role = episode.plan.roles.get(player_name, "")
            for segment, prompt, completion, mask, logprobs, num_turns, seen in buffer.segments():
                if not any(mask):
                    continue
                out.append(Trajectory(
                    episode_id=episode.episode_id, game=episode.plan.name, experiment=row["experiment"]["name"],
                    game_id=int(row["game_instance"]["game_id"]), repeat=episode.repeat,
                    player_name=player_name, role=role, model=self.learner.name,
                    prompt_ids=prompt, completion_ids=completion, env_mask=mask, logprobs=logprobs,
                    num_turns=num_turns, outcome=result.outcome, main_score=result.main_score,
                    reward=result.rewards.get(player_name, math.nan), group_id=episode.group_id,
                    parent_id=episode.parent_id, branch_path=episode.branch_path, segment=segment,
                    messages=tuple(strip_system(seen))))
        return tuple(out)

    def _finish(self, episode: _Episode) -> None:
        result = episode.env.last_result
        trajectories = self._trajectories(episode, result)
        path = self._write(episode, outcome=result.outcome, main_score=result.main_score,
                           rewards=result.rewards, error=None)
        self._record(episode, EpisodeResult(
            episode_id=episode.episode_id, game=episode.plan.name, experiment=episode.row["experiment"]["name"],
            game_id=int(episode.row["game_instance"]["game_id"]), repeat=episode.repeat,
            outcome=result.outcome, main_score=result.main_score, rewards=dict(result.rewards),
            roles=dict(episode.plan.roles), models=self._models(episode), num_turns=len(episode.turns),
            turns=tuple(episode.turns), trajectories=trajectories, episode_scores=dict(result.episode_scores),
            group_id=episode.group_id, parent_id=episode.parent_id, branch_path=episode.branch_path, path=path))

    def _fail(self, episode: _Episode, error: Exception) -> None:
        if self.raise_game_errors:
            raise error
        episode.failed = True
        message = f"{type(error).__name__}: {error}"
        import logging
        logging.getLogger(__name__).warning("episode %s failed: %s", episode.episode_id, message)
        path = self._write(episode, outcome="error", main_score=math.nan, rewards={}, error=error)
        self._record(episode, EpisodeResult(
            episode_id=episode.episode_id, game=episode.plan.name, experiment=episode.row["experiment"]["name"],
            game_id=int(episode.row["game_instance"]["game_id"]), repeat=episode.repeat, outcome="error",
            main_score=math.nan, rewards={}, roles=dict(episode.plan.roles), models=self._models(episode),
            num_turns=len(episode.turns), turns=tuple(episode.turns), trajectories=(),
            group_id=episode.group_id, parent_id=episode.parent_id, branch_path=episode.branch_path,
            path=path, error=message))

    def _models(self, episode: _Episode) -> dict[str, str]:
        env = episode.env
        if env.game_master is None:
            return {}
        return {p.name: p.model.name for p in env.game_master.get_players()}

    def _record(self, episode: _Episode, result: EpisodeResult) -> None:
        self.finished.append(((episode.order, episode.branch_path), result))
        if self.callbacks is not None:
            self.callbacks.on_episode_end(result.summary())

    def _write(self, episode: _Episode, *, outcome, main_score, rewards, error) -> Optional[Path]:
        if self.writer is None:
            return None
        from playpen.records import episode_dir_name
        env, row, plan = episode.env, episode.row, episode.plan
        meta = dict(episode_id=episode.episode_id, group_id=episode.group_id, parent_id=episode.parent_id,
                    branch_path=list(episode.branch_path), repeat=episode.repeat, outcome=outcome,
                    main_score=main_score, rewards=dict(rewards), roles=dict(plan.roles),
                    responders={name: ("learner" if r is LEARNER else getattr(r, "name", str(r)))
                                for name, r in plan.responders.items()},
                    learner=self.learner.name, num_turns=len(episode.turns),
                    learner_tokens={name: sum(b.env_mask) for name, b in episode.buffers.items()})
        interactions = env.interactions if (error is None and env.interactions_recorder is not None) else None
        requests = env.requests() if (error is None and env.game_master is not None) else {}
        return self.writer.write_episode(
            model_dir=plan.model_dir, game_name=plan.name, experiment=row["experiment"],
            game_instance=row["game_instance"],
            dir_name=episode_dir_name(row["game_instance"]["game_id"], episode.repeat, episode.branch_path),
            model_infos=plan.model_infos, interactions=interactions, requests=requests, episode_meta=meta,
            error=error)


class _OwnPlayer:
    """Players a game creates itself (not in ``player_models``): answered the way
    clemcore's Player does: programmatic models by ``_custom_response``, others by
    their model."""

    kind = "programmatic"
    name = "game"

    def respond(self, requests):
        from playpen.clem import clemcore
        from playpen.teachers import TurnResponse
        backends = clemcore().backends
        out = []
        for r in requests:
            if isinstance(r.player.model, backends.CustomResponseModel):
                text = r.player._custom_response(r.context)
                out.append(TurnResponse(text, prompt=r.context))
            else:
                prompt, response_object, text = r.player.model.generate_response(list(r.messages))
                out.append(TurnResponse(text, prompt=prompt, response_object=dict(response_object or {})))
        return out


_OWN_PLAYER = _OwnPlayer()
