"""Resident memory and time of training steps: what every trainer logs per step.

- :func:`memory_metrics`: ``memory/peak_rss_mb`` — the highest resident memory of the
  process since :func:`reset_peak` (each logged step resets it as it begins, so this is
  the step's own peak: Linux ``VmHWM``, reset by writing ``5`` to
  ``/proc/self/clear_refs``; where that is not possible, the peak of the whole process
  so far), ``memory/rss_mb`` (now) and ``memory/process_peak_rss_mb`` (the process's
  peak since it started).
- :func:`release_memory`: garbage collection and glibc's ``malloc_trim``, so that what a
  step freed goes back to the system instead of staying in the allocator's arenas (tensors
  freed by the rollout engine's game threads otherwise stay in per-thread arenas: resident
  memory grew from step to step).
- :func:`training_heap`: around a whole training run, what exists before it is frozen out
  of the garbage collector (``gc.freeze``), so that each step's collection walks only what
  the run created: with torch, transformers, TRL and clemcore imported a full collection
  walks ~640k objects and took 0.33 s, paid once or twice per step; after the freeze it
  takes microseconds.
- :func:`prepare_for_training`: what keeps a training process small, measured on
  smol-135m (``benchmarks/memory.py``): glibc hands large blocks back to the system as
  soon as they are freed (a fixed mmap threshold; by default it raises the threshold
  after the first large free, and then the activations of every step live in heap arenas
  that only grow). The GRPO trainer also runs TRL's per-token log-prob kernel in
  CPU-sized tiles (:func:`playpen.training.trl_trainers.use_cpu_logprob_tiles`).
- :class:`StepClock`: seconds per phase of a step (``time/<phase>_s``), filled by the GRPO
  trainer (:mod:`playpen.training.grpo.steps`) and the rollout function.

Imports nothing heavy (no torch).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import gc
import resource
import time
from contextlib import contextmanager
from pathlib import Path

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_mb(key: str):
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    except OSError:  # not Linux
        pass
    return None


def rss_mb() -> float | None:
    """Resident memory of this process now (MB), None where /proc is missing."""
    return _status_mb("VmRSS")


_resettable: bool | None = None
_peak_before_resets = 0.0  # resetting VmHWM resets ru_maxrss too: the peaks seen before each reset


def process_peak_rss_mb() -> float:
    """The highest resident memory of this process since it started (MB)."""
    return max(_peak_before_resets, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def reset_peak() -> bool:
    """Start a new peak: from now on :func:`peak_rss_mb` is the highest resident memory
    since this call. False where the kernel does not allow it (the peak then stays the
    process's)."""
    global _resettable, _peak_before_resets
    if _resettable is False:
        return False
    _peak_before_resets = process_peak_rss_mb()
    try:
        _CLEAR_REFS.write_text("5")
        _resettable = True
    except OSError:
        _resettable = False
    return _resettable


def peak_rss_mb() -> float:
    """The highest resident memory (MB) since the last :func:`reset_peak` (``VmHWM``), or
    of the whole process where it cannot be reset."""
    if _resettable:
        value = _status_mb("VmHWM")
        if value is not None:
            return value
    return process_peak_rss_mb()


def memory_metrics() -> dict[str, float]:
    """The memory keys of a step's log line (see the module's docstring)."""
    metrics = {"memory/peak_rss_mb": round(peak_rss_mb(), 1),
               "memory/process_peak_rss_mb": round(process_peak_rss_mb(), 1)}
    now = rss_mb()
    if now is not None:
        metrics["memory/rss_mb"] = round(now, 1)
    return metrics


_libc = None


def release_memory() -> None:
    """Collect garbage and hand the allocator's free memory back to the system (glibc
    ``malloc_trim``; a no-op elsewhere)."""
    global _libc
    gc.collect()
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _libc.malloc_trim.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):
            _libc = False
    if _libc:
        _libc.malloc_trim(0)


_frozen_depth = 0


@contextmanager
def training_heap():
    """One full collection, then everything alive is frozen (``gc.freeze``) until the
    outermost ``training_heap`` ends (``gc.unfreeze``, also when it raises): the
    collections of :func:`release_memory` inside walk only the objects created since.
    A cycle among the frozen objects that becomes garbage during the run is freed after it."""
    global _frozen_depth
    if _frozen_depth == 0:
        gc.collect()
        gc.freeze()
    _frozen_depth += 1
    try:
        yield
    finally:
        _frozen_depth -= 1
        if _frozen_depth == 0:
            gc.unfreeze()


M_MMAP_THRESHOLD = -3  # glibc mallopt parameter
MMAP_THRESHOLD = 128 * 1024  # glibc's initial value, kept fixed


def prepare_for_training() -> bool:
    """Fix glibc's mmap threshold (see the module's docstring). False where that is not
    possible (not glibc)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    except (OSError, AttributeError):  # not glibc
        return False


class StepClock:
    """Seconds per phase of the current step: ``with clock.phase("rollout"): ...`` adds
    the time spent inside to ``time/rollout_s``; :meth:`metrics` gives the phases, the
    step's wall time since :meth:`start` (``time/step_s``) and what no phase covers
    (``time/other_s``: bookkeeping, rewards, logging). Phases must not nest."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.started: float | None = None

    def start(self) -> None:
        self.seconds = {}
        self.started = time.perf_counter()

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    @contextmanager
    def phase(self, name: str):
        began = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - began)

    def metrics(self) -> dict[str, float]:
        out = {f"time/{name}_s": round(value, 3) for name, value in self.seconds.items()}
        if self.started is not None:
            total = time.perf_counter() - self.started
            out["time/step_s"] = round(total, 3)
            out["time/other_s"] = round(max(0.0, total - sum(self.seconds.values())), 3)
        return out
