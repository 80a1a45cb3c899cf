"""Serving and recording in-step side calls (the mechanism is :mod:`playpen.rollouts.steps`).

A side call is a model call a game master makes inside ``setup``/``step`` instead of
asking for a turn: a legacy master probing its player ("does the other player know X?",
with ``memorize=False``, so neither question nor answer enters the dialogue), a judge.
The rollout loop answers all side calls waiting at one moment together — the learner's
in ONE batched generate (the same path, sampling and context-window rule as its turns),
each partner's in one ``respond`` — and records every one:

- in the :class:`~playpen.rollouts.types.EpisodeResult` (``side_calls``);
- for the learner, as a trajectory of its own (``Trajectory.side_call`` = the call's
  index): the templated messages the game gave as prompt, the generated ids as
  completion (all model tokens), the episode's outcome and the player's reward. The
  player's turn trajectory is untouched, as the player's memory is;
- in ``episode.json`` (``side_calls``: player, role, responder, messages, response), which
  ``playpen dataset`` turns into records with ``meta.side_call``.

Side calls to API partners (clemcore models) and programmatic players are not routed
here: API models are called directly by the game code, programmatic players answer by
``_custom_response``.
"""
from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from playpen.errors import ContextOverflowError, PartnerError
from playpen.inference import engine
from playpen.rollouts.buffers import TokenBuffer
from playpen.rollouts.partners import TurnRequest, generated_response
from playpen.rollouts.steps import StepJob
from playpen.rollouts.types import LEARNER, SideCall


class _SideCaller:
    """What a partner sees as the player of a side call (the game did not say which)."""

    name = "side call"
    game_role = "side call"


class SideCallServer:
    """Answers the side calls of waiting :class:`StepJob` s (``job.key`` is the Episode)
    and records them in their episodes. ``clock`` is the loop's time and token account."""

    def __init__(self, learner, template_kwargs: dict, clock):
        self.learner, self.template_kwargs, self.clock = learner, template_kwargs, clock
        self.num_calls = 0

    def __call__(self, jobs: list[StepJob]) -> list[Any]:
        answers: list[Any] = [None] * len(jobs)
        mine = [i for i, job in enumerate(jobs) if job.request.responder is LEARNER]
        if mine:
            self._generate(jobs, mine, answers)
        groups: dict[int, list[int]] = {}
        for i, job in enumerate(jobs):
            if job.request.responder is not LEARNER:
                groups.setdefault(id(job.request.responder), []).append(i)
        for rows in groups.values():
            self._respond(jobs, rows, answers)
        self.num_calls += len(jobs)
        return answers

    def _generate(self, jobs: list[StepJob], rows: list[int], answers: list) -> None:
        learner = self.learner
        buffers = [TokenBuffer() for _ in rows]
        prompts = [b.prepare(learner.tokenizer, jobs[i].request.messages, self.template_kwargs)
                   for b, i in zip(buffers, rows)]
        started, call_start = time.perf_counter(), datetime.now()
        generations, calls = engine.generate_within(learner.model, learner.tokenizer, prompts, learner.sampling)
        self.clock.generate += time.perf_counter() - started
        self.clock.calls += calls
        duration = str(datetime.now() - call_start)
        for i, buffer, prompt, gen in zip(rows, buffers, prompts, generations):
            job = jobs[i]
            if gen is None:
                answers[i] = ContextOverflowError(
                    f"a side call's prompt has {len(prompt)} tokens: it does not fit {learner.name}'s "
                    f"context window")
                continue
            self.clock.tokens += len(gen.token_ids)
            buffer.add_generation(gen.token_ids, gen.logprobs, gen.text)
            response = generated_response(learner.tokenizer, prompt, gen, learner.sampling, learner.name,
                                          call_start, duration)
            index = self._record(job, "learner", response.text, len(gen.token_ids))
            job.key.side_buffers.append((index, job.key.side_calls[index].player_name, buffer))
            answers[i] = (response.prompt, response.response_object, response.text)

    def _respond(self, jobs: list[StepJob], rows: list[int], answers: list) -> None:
        partner = jobs[rows[0]].request.responder
        requests = [TurnRequest(_SideCaller(), jobs[i].request.messages[-1], jobs[i].request.messages)
                    for i in rows]
        started = time.perf_counter()
        try:
            responses = partner.respond(requests)
        except PartnerError:
            raise  # as for turns: a partner that cannot answer stops the rollout
        except Exception as e:  # noqa: BLE001 - raised inside the game code that asked
            for i in rows:
                answers[i] = e
            return
        self.clock.partner_answered(partner, time.perf_counter() - started, responses)
        for i, response in zip(rows, responses):
            self._record(jobs[i], getattr(partner, "name", "partner"), response.text, response.num_new_tokens)
            answers[i] = (response.prompt, dict(response.response_object), response.text)

    @staticmethod
    def _record(job: StepJob, responder: str, text: str, num_new_tokens: int) -> int:
        episode = job.key
        name = player_of(episode, job.request.responder, job.request.messages)
        episode.side_calls.append(SideCall(name, episode.plan.roles.get(name, ""), responder,
                                           job.request.messages, text, num_new_tokens))
        return len(episode.side_calls) - 1


def player_of(episode, responder: Any, messages: tuple[dict, ...]) -> str:
    """The player whose model was called: among the episode's players answered by
    `responder`, the one whose memory the messages continue (longest match)."""
    names = [name for name, r in episode.plan.responders.items() if r is responder]
    master = episode.env.game_master
    if len(names) > 1 and master is not None:
        players = {p.name: p for p in master.get_players()}
        given = [(m["role"], m["content"]) for m in messages]

        def match(name: str) -> int:
            memory = [(m["role"], m["content"]) for m in players[name].get_perspective()] if name in players else []
            return len(memory) if given[:len(memory)] == memory else -1
        names.sort(key=match, reverse=True)
    return names[0] if names else "unknown"
