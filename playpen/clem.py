"""The one module that imports clemcore and contains its import-time side effects.

`import clemcore` configures logging from a YAML file: it opens ``./clembench.log``
in the current directory, sets the root logger to INFO and disables every logger
created before it. Loading a model through its huggingface backend calls
``torch.set_num_threads(1)`` process-wide. Everything in playpen that needs clemcore
goes through :func:`clemcore` (or the helpers here), which undoes those effects. Its
runners only log the errors of failing episodes: :class:`RunnerErrors` collects them.
"""
from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sys
from pathlib import Path
from types import ModuleType

from playpen.remote import bound_remote_calls

_LOG_DIR_ENV = "PLAYPEN_LOG_DIR"


def log_dir() -> Path:
    """Where clemcore's ``clembench.log`` goes (default: ``./playpen-records/logs``)."""
    return Path(os.environ.get(_LOG_DIR_ENV, Path.cwd() / "playpen-records" / "logs"))


@contextlib.contextmanager
def preserved_logging():
    """Restore the root logger and re-enable loggers that clemcore's dictConfig disabled."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    known = {name: lg for name, lg in logging.root.manager.loggerDict.items()
             if isinstance(lg, logging.Logger)}
    was_disabled = {name: lg.disabled for name, lg in known.items()}
    try:
        yield
    finally:
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
                if isinstance(handler, logging.FileHandler):
                    # keep clemcore's file log, but in playpen's log folder and only for clemcore
                    logging.getLogger("clemcore").addHandler(handler)
        root.setLevel(level)
        for name, lg in known.items():
            lg.disabled = was_disabled[name]


@contextlib.contextmanager
def _in_directory(path: Path):
    previous = Path.cwd()
    path.mkdir(parents=True, exist_ok=True)
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


def clemcore() -> ModuleType:
    """Import clemcore once, with its side effects contained; returns the module."""
    if "clemcore" in sys.modules:
        return sys.modules["clemcore"]
    with preserved_logging(), _in_directory(log_dir()):
        module = importlib.import_module("clemcore")
        importlib.import_module("clemcore.backends")
    return module


def clemgame() -> ModuleType:
    """``clemcore.clemgame`` (slow: ~4 s, pulls in the OpenEnv server)."""
    clemcore()
    with preserved_logging():
        return importlib.import_module("clemcore.clemgame")


@contextlib.contextmanager
def preserved_torch_threads():
    """clemcore's HF backend sets torch to one thread; give the process its threads back."""
    import torch
    threads = torch.get_num_threads()
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@contextlib.contextmanager
def torch_threads(num_threads: int | None):
    """torch's CPU threads set to `num_threads` inside (None: left as they are), restored after."""
    if num_threads is None:
        yield
        return
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(num_threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def playing_threads(models) -> int | None:
    """The torch CPU threads to play games with, by backend: 1 when a local (torch) model
    generates on the CPU — many small ``generate`` calls, where one thread beat torch's
    default by far on a busy 2-core machine (``benchmarks/threads.py``, numbers in
    benchmarks/README.md); None (torch's default) for models on a GPU and for API or
    programmatic backends, which leave the CPU threads to the game code."""
    for model in models:
        module = getattr(model, "model", None)
        parameters = getattr(module, "parameters", None)
        if callable(parameters):
            first = next(iter(parameters()), None)
            if first is not None and first.device.type == "cpu":
                return 1
    return None


@contextlib.contextmanager
def hf_device_map(device_map: dict | None):
    """clemcore's huggingface_local backend loads every model with ``device_map="auto"``
    (spread over all visible GPUs); a data-parallel rank needs its model whole on its own
    device. Inside, that backend loads with `device_map` instead (None: unchanged)."""
    if device_map is None:
        yield
        return
    clemcore()
    from clemcore.backends import huggingface_local_api as backend_module
    original = backend_module.AutoModelForCausalLM

    class _OnDevice:
        @staticmethod
        def from_pretrained(*args, **kwargs):
            return original.from_pretrained(*args, **{**kwargs, "device_map": device_map})

    backend_module.AutoModelForCausalLM = _OnDevice
    try:
        yield
    finally:
        backend_module.AutoModelForCausalLM = original


def load_model(spec, gen_args: dict | None = None, device_map: dict | None = None):
    """Load a clemcore Model for a unified ModelSpec, keeping torch's thread count; a local
    HF model goes to `device_map` when given (see :func:`hf_device_map`)."""
    backends = clemcore().backends
    gen_args = gen_args or dict(temperature=0.0, max_tokens=300)
    registry = backends.BackendRegistry.from_packaged_and_cwd_files()
    if spec.is_programmatic():
        return backends.CustomResponseModel(spec)
    if spec.is_human():
        return backends.HumanModel(spec)
    with preserved_torch_threads(), preserved_logging(), hf_device_map(device_map):
        backend = registry.get_backend_for(spec.backend)
        model = backend.get_model_for(spec)
    model.set_gen_args(**gen_args)
    if isinstance(backend, backends.RemoteBackend):  # timeouts, bounded retries (playpen.remote)
        bound_remote_calls(model)
    return model


class RunnerErrors:
    """Collects the tracebacks clemcore's runners log (and only log) for failing episodes,
    and holds back the runners' "N exceptions occurred" summary until :meth:`replay`: a
    game that fails as a whole is reported in one line instead."""

    LOGGERS = ("clemcore.clemgame.runners.batchwise", "clemcore.clemgame.runners.sequential")

    def __init__(self):
        self.records: list[str] = []
        self.held: list[logging.LogRecord] = []
        self.handler = logging.Handler(logging.ERROR)
        self.handler.setFormatter(logging.Formatter("%(message)s"))
        self.handler.emit = self._collect

    def _collect(self, record: logging.LogRecord) -> None:
        if len(self.records) < 3 and record.exc_info:
            self.records.append(self.handler.format(record))

    def _hold(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            self.held.append(record)
            return False
        return True

    def replay(self) -> None:
        """Log the held-back summaries after all (the game did play)."""
        for record in self.held:
            logging.getLogger("clemcore.run").handle(record)

    def __enter__(self):
        for name in self.LOGGERS:
            logging.getLogger(name).addHandler(self.handler)
        logging.getLogger("clemcore.run").addFilter(self._hold)
        return self

    def __exit__(self, *exc):
        for name in self.LOGGERS:
            logging.getLogger(name).removeHandler(self.handler)
        logging.getLogger("clemcore.run").removeFilter(self._hold)
