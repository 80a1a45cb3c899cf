"""Remote (API) models: connect/read timeouts, bounded retries, a pre-flight reachability check.

clemcore's API backends build their HTTP clients without timeouts and retry every failing
call 3 times 10 s apart, on top of the OpenAI client's own 2 retries: a hanging server
stalls a run without limit, and a server answering 500 gets 9 requests per call.
:func:`playpen.clem.load_model` hands every remote model to :func:`bound_remote_calls`,
which replaces both with :class:`RemoteLimits`. :func:`check_reachable` is the one
pre-flight check that a model's server answers (rollout partners and evaluation use it).
"""
from __future__ import annotations

import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Optional

from playpen.errors import PlaypenError, RemoteModelError


@dataclass(frozen=True)
class RemoteLimits:
    """Limits on every call to a remote (API) model; `playpen run` and `playpen eval` set
    them from ``--connect-timeout``, ``--read-timeout``, ``--retries``, ``--retry-budget``.

    A call failing with a connection error, a timeout, a 5xx, 408, 409 or 429 is retried up
    to `retries` times (1 s, 2 s, 4 s ... apart), but no retry starts that would begin after
    `retry_budget` seconds since the call began: one call takes at most about
    ``retry_budget + read_timeout`` seconds. Other errors (a wrong key or model id: 4xx) are
    not retried. The first retried and the first slow (> `slow_call` s) call of each model are
    reported on stderr; a call that still fails raises :class:`RemoteModelError`.
    """

    connect_timeout: float = 10.0
    read_timeout: float = 120.0
    retries: int = 2
    retry_budget: float = 300.0
    slow_call: float = 30.0

    def __post_init__(self):
        for name in ("connect_timeout", "read_timeout", "retry_budget", "slow_call"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and value > 0):
                raise PlaypenError(f"option --{name.replace('_', '-')}: {value!r} is not valid; "
                                   f"expected a number of seconds > 0")
        if not (isinstance(self.retries, int) and self.retries >= 0):
            raise PlaypenError(f"option --retries: {self.retries!r} is not valid; expected an integer >= 0")


_limits = RemoteLimits()


def remote_limits() -> RemoteLimits:
    """The limits given to remote models loaded from now on (process-wide)."""
    return _limits


def set_remote_limits(limits: RemoteLimits) -> None:
    """Set the limits for remote models loaded from now on (the CLI does it from its options)."""
    global _limits
    _limits = limits


def base_url_of(model: Any) -> Optional[str]:
    """The server URL of a remote clemcore model (its client's ``base_url``), else None."""
    base = getattr(getattr(model, "client", None), "base_url", None)
    return str(base) if base else None


def check_reachable(model: Any, who: str, timeout: Optional[float] = None) -> None:
    """RemoteModelError (one line naming `who` and the URL) when `model` is remote and its
    server does not answer ``GET <base_url>/models`` within `timeout` (default: the connect
    timeout). Any HTTP answer counts: an auth or routing error is the calls' business."""
    url = base_url_of(model)
    if url is None:
        return
    try:
        urllib.request.urlopen(url.rstrip("/") + "/models",
                               timeout=timeout or remote_limits().connect_timeout).close()
    except urllib.error.HTTPError:
        return
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise RemoteModelError(f"{who} cannot reach its server at {url}: {reason}. "
                               f"Is the server running (see key.json 'base_url')?") from e


def retryable(error: BaseException) -> bool:
    """A failure worth another attempt: no answer (connection, timeout), 5xx, 408, 409, 429."""
    status = getattr(error, "status_code", None)
    if isinstance(status, int):
        return status in (408, 409, 429) or status >= 500
    name = type(error).__name__
    return isinstance(error, (ConnectionError, TimeoutError)) or "Timeout" in name or "Connection" in name


class BoundedCalls:
    """``generate_response`` of a remote model under :class:`RemoteLimits` (thread-safe)."""

    def __init__(self, model: Any, call, limits: RemoteLimits):
        self.model, self.call, self.limits = model, call, limits
        self.url = base_url_of(model) or "its server"
        self._reported: set[str] = set()
        self._lock = threading.Lock()

    def report_once(self, kind: str, message: str) -> None:
        with self._lock:
            if kind in self._reported:
                return
            self._reported.add(kind)
        print(f"[playpen] {message} (said once per model)", file=sys.stderr, flush=True)

    def __call__(self, messages):
        limits, name = self.limits, getattr(self.model, "name", "remote model")
        began, delay = time.monotonic(), 1.0
        for attempt in range(1, limits.retries + 2):
            started = time.monotonic()
            try:
                result = self.call(self.model, messages)
            except Exception as e:  # noqa: BLE001 - re-raised below in one line, with its cause
                spent = time.monotonic() - began
                cause = " ".join(f"{type(e).__name__}: {e}".split())[:300]
                if not retryable(e) or attempt > limits.retries or spent + delay > limits.retry_budget:
                    raise RemoteModelError(
                        f"model '{name}' at {self.url}: call failed after {attempt} attempt(s) in {spent:.0f} s "
                        f"({cause}); limits: --read-timeout {limits.read_timeout:g} --retries {limits.retries} "
                        f"--retry-budget {limits.retry_budget:g}") from e
                self.report_once("retry", f"model '{name}' at {self.url}: {cause}; retrying in {delay:g} s "
                                          f"(at most {limits.retries} retries within {limits.retry_budget:g} s)")
                time.sleep(delay)
                delay *= 2
                continue
            took = time.monotonic() - started
            if took > limits.slow_call:
                self.report_once("slow", f"model '{name}' at {self.url}: slow call ({took:.0f} s; "
                                         f"--read-timeout {limits.read_timeout:g})")
            return result
        raise AssertionError("unreachable")


def bound_remote_calls(model: Any, limits: Optional[RemoteLimits] = None) -> Any:
    """Put a loaded remote clemcore model under `limits` (default :func:`remote_limits`): its
    client gets the timeouts and no retries of its own, and ``generate_response`` drops
    clemcore's ``@retry`` (3 tries, 10 s apart) for :class:`BoundedCalls`. Returns the model."""
    limits = limits or remote_limits()
    client = getattr(model, "client", None)
    if client is not None and hasattr(client, "with_options"):
        import httpx
        model.client = client.with_options(
            timeout=httpx.Timeout(limits.read_timeout, connect=limits.connect_timeout), max_retries=0)
    method = type(model).generate_response
    # clemcore's @retry is made with the `decorator` package, whose wrapper keeps the
    # decorated function (clemcore's response-augmenting one) as __wrapped__
    code_file = getattr(getattr(method, "__code__", None), "co_filename", "")
    if "decorator" in code_file and hasattr(method, "__wrapped__"):
        method = method.__wrapped__
    model.generate_response = BoundedCalls(model, method, limits)
    return model
