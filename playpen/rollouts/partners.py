"""Partners: who answers the turns the learner does not play.

A :class:`Partner` answers a batch of turns in one call:

- :class:`ProgrammaticPartner` asks the game's own player (``Player._custom_response``),
  the ``programmatic``/``mock`` model of clemcore;
- :class:`HFTeacher` is a frozen local HF model, batched with :mod:`playpen.inference.engine`;
- :class:`ClemPartner` wraps any clemcore ``Model`` (API backends): its calls run
  concurrently on a thread pool with a bounded number in flight, under the timeouts and
  bounded retries of :mod:`playpen.remote`, after a pre-flight check that names an
  unreachable server instead of hanging on it.

:func:`as_partner` turns what a user passes (a name, a clemcore model, a Learner) into one.
"""
from __future__ import annotations

import abc
import concurrent.futures
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Optional, Sequence

from playpen import models
from playpen.clem import clemcore
from playpen.envs.game import Response, answer_by_own_model
from playpen.errors import PartnerError, PlaypenError
from playpen.inference import engine
from playpen.remote import check_reachable
from playpen.rollouts import chat
from playpen.rollouts.chat import template_kwargs_of
from playpen.rollouts.steps import side_call
from playpen.rollouts.types import LEARNER, Learner, SamplingConfig

PROGRAMMATIC_NAMES = ("programmatic", "mock")



@dataclass(frozen=True)
class TurnRequest:
    """A turn to answer: the game's player, its new context and the full message list."""

    player: Any = field(repr=False)
    context: dict
    messages: tuple[dict, ...]


TurnResponse = Response
"""A partner's answer: the env's :class:`playpen.envs.Response` (the old name is kept)."""


def generated_response(tokenizer, prompt_ids, gen, sampling: SamplingConfig, model_name: str,
                       call_start: datetime, duration: str) -> Response:
    """The Response of a locally generated turn, with the request log entries
    ``clem run``'s HF backend writes (prompt text, raw output, timing)."""
    return Response(
        gen.text,
        prompt={"inputs": tokenizer.decode(prompt_ids), "max_new_tokens": sampling.max_new_tokens,
                "temperature": sampling.temperature, "num_prompt_tokens": len(prompt_ids)},
        response_object={"response": tokenizer.decode(gen.token_ids), "finished": gen.finished,
                         "num_new_tokens": len(gen.token_ids),
                         "clem_player": {"call_start": str(call_start), "call_duration": duration,
                                         "response": gen.text, "model_name": model_name}},
        num_new_tokens=len(gen.token_ids))


class Partner(abc.ABC):
    """Answers batches of turns for the roles it plays."""

    kind: ClassVar[str] = "teacher"  # "teacher" | "programmatic"
    generates: ClassVar[bool] = False  # a local model: its time counts as generation time
    concurrent: ClassVar[bool] = False  # may run in a thread while the learner generates

    def __init__(self, name: str):
        self.name = name
        self._clem_model = None

    @abc.abstractmethod
    def respond(self, requests: Sequence[TurnRequest]) -> list[TurnResponse]:
        """One answer per request, in order."""

    def clem_model(self):
        """The clemcore Model that stands in the game master's ``player_models`` slot; a
        game that calls it inside a step gets a batched, recorded side call (see
        :mod:`playpen.rollouts.steps`)."""
        if self._clem_model is None:
            self._clem_model = stand_in_model(self.name, lambda messages: side_call(self, messages, self._direct_call))
        return self._clem_model

    def check(self) -> None:
        """Fail fast (PartnerError) when the partner cannot work at all."""

    def close(self) -> None:
        """Release threads and connections."""

    def _direct_call(self, messages: list[dict]):
        """A game master calling its player outside the rollout loop's steps."""
        player = _MessagesOnlyPlayer()
        response = self.respond([TurnRequest(player, messages[-1], tuple(messages))])[0]
        return response.prompt, response.response_object, response.text


class _MessagesOnlyPlayer:
    name = "direct call"
    game_role = "direct call"


class ProgrammaticPartner(Partner):
    """Answers as clemcore's ``Player`` itself would: a programmatic (``CustomResponseModel``)
    player by its ``_custom_response``, any other by its own model. Serves the roles given
    to ``programmatic``/``mock`` and the players a game builds itself (not in
    ``player_models``: a programmatic questioner, an evaluator)."""

    kind = "programmatic"

    def __init__(self, name: str = "programmatic"):
        super().__init__(name)

    def clem_model(self):
        if self._clem_model is None:
            backends = clemcore().backends
            self._clem_model = backends.CustomResponseModel(backends.ModelSpec(model_name=self.name))
        return self._clem_model

    def respond(self, requests):
        return [answer_by_own_model(request.player, request.context, request.messages, self.name)
                for request in requests]


GAME_PLAYERS = ProgrammaticPartner("game")
"""The responder of players a game builds itself."""


class HFTeacher(Partner):
    """A frozen local HF causal LM, answering all its turns of a step in one generate.

    With ``adapter`` (a peft adapter of ``model``, or ``"__base__"``) it is an adapter
    player: the rollout loop answers its turns in the same generate as every other adapter
    player on the same model object, token-exact, and gives it trajectories."""

    generates = True

    def __init__(self, model: Any, tokenizer: Any, name: str, sampling: SamplingConfig = SamplingConfig(),
                 template_kwargs: Optional[dict] = None, adapter: Optional[str] = None):
        super().__init__(name)
        self.model, self.tokenizer, self.sampling = model, tokenizer, sampling
        self.template_kwargs = dict(template_kwargs or {})
        self.adapter = adapter
        self.num_generated_tokens = 0

    def as_learner(self) -> Learner:
        """This player as the rollout loop generates for it."""
        return Learner(self.model, self.tokenizer, self.name, self.sampling, self.template_kwargs, self.adapter)

    def respond(self, requests):
        prompts = [chat.prompt_ids(self.tokenizer, r.messages, self.template_kwargs) for r in requests]
        started = datetime.now()
        names = None if self.adapter is None else [self.adapter] * len(prompts)
        generations = engine.generate(self.model, self.tokenizer, prompts, self.sampling, adapter_names=names)
        duration = str(datetime.now() - started)
        self.num_generated_tokens += sum(len(gen.token_ids) for gen in generations)
        return [generated_response(self.tokenizer, prompt, gen, self.sampling, self.name, started, duration)
                for prompt, gen in zip(prompts, generations)]


class ClemPartner(Partner):
    """Any clemcore Model; remote calls run concurrently (at most ``max_in_flight``).

    A model loaded by name already has timeouts and bounded retries
    (:class:`playpen.remote.RemoteLimits`); ``retries`` adds attempts on top (after
    ``retry_delay`` seconds, doubling) for other models. A call that still fails raises a
    :class:`PartnerError` naming the partner and the cause.
    """

    concurrent = True

    def __init__(self, model: Any, *, max_in_flight: int = 8, retries: int = 0, retry_delay: float = 1.0,
                 check_timeout: Optional[float] = None):
        super().__init__(model.name)
        self.model = model
        self.max_in_flight = max(1, max_in_flight)
        self.retries, self.retry_delay, self.check_timeout = retries, retry_delay, check_timeout
        self._pool: Optional[concurrent.futures.ThreadPoolExecutor] = None

    def clem_model(self):
        return self.model

    def check(self) -> None:
        check_reachable(self.model, f"partner '{self.name}'", self.check_timeout)

    def respond(self, requests):
        if len(requests) == 1 or self.max_in_flight == 1:
            return [self._call(r) for r in requests]
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(self.max_in_flight,
                                                               thread_name_prefix=f"partner-{self.name}")
        return list(self._pool.map(self._call, requests))

    def _call(self, request: TurnRequest) -> TurnResponse:
        delay = self.retry_delay
        for attempt in range(self.retries + 1):
            try:
                prompt, response_object, text = self.model.generate_response(list(request.messages))
                return Response(text, prompt=prompt, response_object=dict(response_object or {}))
            except PlaypenError:
                raise  # already one line naming the model and its server (playpen.remote)
            except Exception as e:  # noqa: BLE001 - re-raised below with the partner's name
                if attempt == self.retries:
                    raise PartnerError(f"partner '{self.name}' failed after {self.retries + 1} "
                                       f"attempt(s): {type(e).__name__}: {e}") from e
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


# ----------------------------------------------------------------------------- conversion

def as_partner(value: Any, *, sampling: SamplingConfig = SamplingConfig(), max_in_flight: int = 8):
    """A Partner for ``value`` (see :data:`playpen.rollouts.PartnerLike`); ``LEARNER`` for the learner."""
    if isinstance(value, Partner):
        return value
    if isinstance(value, str):
        if value == LEARNER:
            return LEARNER
        if value in PROGRAMMATIC_NAMES:
            return ProgrammaticPartner(value)
        # through the module: tests replace models.load_model_by_name to prove no model loads
        model = models.load_model_by_name(value, gen_args=dict(temperature=sampling.temperature,
                                                        max_tokens=sampling.max_new_tokens), role="partner")
        return as_partner(model, sampling=sampling, max_in_flight=max_in_flight)
    if isinstance(value, Learner):
        return HFTeacher(value.model, value.tokenizer, value.name, value.sampling,
                         dict(value.template_kwargs or {}) if value.adapter is not None else None, value.adapter)
    backends = clemcore().backends
    if isinstance(value, backends.CustomResponseModel):
        return ProgrammaticPartner(value.name)
    if isinstance(value, backends.Model):
        if hasattr(value, "model") and hasattr(value, "tokenizer"):  # HuggingfaceLocalModel
            teacher_sampling = SamplingConfig.from_gen_args(
                {"temperature": sampling.temperature, "max_tokens": sampling.max_new_tokens, **(value.gen_args or {})},
                max_batch_size=sampling.max_batch_size)
            return HFTeacher(value.model, value.tokenizer, value.name, teacher_sampling, template_kwargs_of(value))
        return ClemPartner(value, max_in_flight=max_in_flight)
    raise TypeError(f"cannot use {value!r} as a partner: pass 'learner', 'programmatic', a model "
                    f"name, a Learner, a clemcore Model or a playpen.rollouts.partners.Partner")


_STAND_IN_CLASS = None


def stand_in_model(name: str, direct_call, gen_args: Optional[dict] = None, backend: str = "playpen",
                   batch_call=None):
    """A clemcore Model named ``name`` for a game master's ``player_models``.

    The rollout loop answers its player's turns itself; ``direct_call(messages)`` serves
    game masters that call the model themselves (side calls, see :mod:`playpen.rollouts.steps`).
    ``batch_call(batch_messages)``, when given, answers a clemcore runner's batch in one call
    (:func:`engine_player`); else each conversation is a ``direct_call``.
    """
    global _STAND_IN_CLASS
    if _STAND_IN_CLASS is None:
        backends = clemcore().backends

        class StandInModel(backends.BatchGenerativeModel):
            def __init__(self, spec, call, batch_call=None):
                super().__init__(spec)
                self._call, self._batch_call = call, batch_call

            def generate_response(self, messages):
                return self._call(list(messages))

            def generate_batch_response(self, batch_messages):
                if self._batch_call is not None:
                    return self._batch_call([list(m) for m in batch_messages])
                return [self._call(list(m)) for m in batch_messages]

            def __deepcopy__(self, memo):
                return self  # stateless proxy: branches share it

        _STAND_IN_CLASS = StandInModel
    spec = clemcore().backends.ModelSpec(model_name=name, backend=backend)
    model = _STAND_IN_CLASS(spec, direct_call, batch_call)
    model.set_gen_args(**(gen_args or dict(temperature=0.0, max_tokens=300)))
    return model


def engine_player(learner: Learner):
    """A clemcore Model that plays ``learner`` through playpen's door with the learner's
    sampling (its engine: ``--engine`` of ``playpen eval``), a clemcore runner's batch in one
    ``generate``; its records are those of a playpen-generated turn."""
    teacher = HFTeacher(learner.model, learner.tokenizer, learner.name, learner.sampling,
                        dict(learner.template_kwargs or {}), learner.adapter)

    def batch(batch_messages):
        requests = [TurnRequest(_MessagesOnlyPlayer(), m[-1], tuple(m)) for m in batch_messages]
        return [(r.prompt, r.response_object, r.text) for r in teacher.respond(requests)]
    return stand_in_model(learner.name, teacher._direct_call,
                          dict(temperature=learner.sampling.temperature, max_tokens=learner.sampling.max_new_tokens),
                          batch_call=batch)
