"""Running game code (``env.reset`` / ``env.step``) so that model calls made INSIDE it can
be batched across episodes.

A legacy game master may call its player's model in the middle of a step — a probing
question whose answer decides the score, a judge — and wait for the answer. Such a
step cannot return before the call is answered. :func:`run_steps` therefore runs each
episode's step in its own thread, ONE AT A TIME: a step runs until it ends or makes a
side call (:func:`side_call`, from the stand-in models in the game's ``player_models``),
then the next step runs. When every step has ended or waits, the waiting calls are
answered together (one batched generate for the learner's) and the waiting steps resume,
again one at a time. Game code never runs concurrently, so it stays deterministic.
Outside :func:`run_steps` (e.g. a game calling a model while roles are probed) a side
call is served at once.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

_local = threading.local()


@dataclass(frozen=True)
class SideCallRequest:
    """A model call made by game code: who must answer (``LEARNER`` or a Partner) and the
    messages the game gave the model."""

    responder: Any
    messages: tuple[dict, ...]


class StepJob:
    """One piece of game code for one episode (``key``), run in its own thread."""

    def __init__(self, key: Any, fn: Callable[[], Any]):
        self.key, self.fn = key, fn
        self.request: Optional[SideCallRequest] = None  # set while it waits for an answer
        self.result: Any = None
        self.error: Optional[BaseException] = None
        self.done = False
        self._answer: Any = None
        self._go = threading.Semaphore(0)
        self._back = threading.Semaphore(0)

    def _body(self) -> None:
        _local.job = self
        try:
            self.result = self.fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller of run_steps
            self.error = e
        finally:
            self.done = True
            self._back.release()

    def start(self) -> None:
        """Run until the code ends or waits for a side call."""
        threading.Thread(target=self._body, name="playpen-step", daemon=True).start()
        self._back.acquire()

    def resume(self, answer: Any) -> None:
        """Give the waiting side call its answer (or an exception to raise there) and run on."""
        self.request, self._answer = None, answer
        self._go.release()
        self._back.acquire()

    def ask(self, request: SideCallRequest) -> Any:
        """(In the job's thread) wait for the answer to a side call."""
        self.request = request
        self._back.release()
        self._go.acquire()
        if isinstance(self._answer, BaseException):
            raise self._answer
        return self._answer


def run_steps(calls: Sequence[tuple[Any, Callable[[], Any]]],
              serve: Callable[[list[StepJob]], list[Any]]) -> list[StepJob]:
    """Run ``(key, fn)`` calls one at a time; answer their side calls with ``serve(waiting
    jobs) -> answers`` (one per job, in order) until all have ended. Returns the jobs with
    their ``result`` or ``error``."""
    jobs = [StepJob(key, fn) for key, fn in calls]
    for job in jobs:
        job.start()
    while True:
        waiting = [job for job in jobs if not job.done and job.request is not None]
        if not waiting:
            return jobs
        for job, answer in zip(waiting, serve(waiting)):
            job.resume(answer)


def side_call(responder: Any, messages: Sequence[dict], serve_now: Callable[[list[dict]], Any]) -> Any:
    """A stand-in model's call from game code: inside :func:`run_steps` it waits for the
    batched answer; elsewhere ``serve_now(messages)`` answers it at once."""
    job = getattr(_local, "job", None)
    if job is None:
        return serve_now(list(messages))
    return job.ask(SideCallRequest(responder, tuple(dict(m) for m in messages)))
