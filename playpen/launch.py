"""``playpen run FILE --num-processes N``: the same run on N processes of this machine,
started by ``accelerate launch`` (torchrun underneath), which this process waits for.

Several machines, DeepSpeed or any other accelerate setting: ``--accelerate-config FILE``
(an ``accelerate config`` file, e.g. ``examples/accelerate/*.yaml``) or ``accelerate
launch`` itself (docs/distributed.md). The ranks are told apart by :mod:`playpen.distributed`.

When a rank fails, torchrun stops the others; this process then says in one line which
rank stopped and how, and names the last complete checkpoint, which ``--resume``
continues from. A Ctrl-C or SIGTERM here goes on to every rank: they finish the step they
are in, save and stop together (a second signal stops them at once).
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import tempfile
from pathlib import Path
from typing import Optional, Sequence

from playpen.distributed import RUN_INFO_ENV, is_distributed, read_run_dir
from playpen.errors import PlaypenError
from playpen.training.common.checkpoints import latest_checkpoint

LAUNCHED_ENV = "PLAYPEN_LAUNCHED"
"""Set in the ranks' environment: a rank never launches again."""


def check_num_processes(num_processes: Optional[int], accelerate_config: Optional[str] = None) -> None:
    """``--num-processes`` before anything loads: at least 1, at most the GPUs there are (on
    a GPU machine), not from inside a launched run; ``--accelerate-config`` a file. None:
    not given (1, or what the accelerate config says)."""
    if num_processes is not None and num_processes < 1:
        raise PlaypenError(f"option --num-processes: {num_processes} is not valid; expected an integer >= 1 "
                           f"(processes on this machine; several machines: accelerate launch, see "
                           f"docs/distributed.md)")
    if accelerate_config is not None and not Path(accelerate_config).is_file():
        raise PlaypenError(f"option --accelerate-config: '{accelerate_config}' is not a file (an `accelerate "
                           f"config` YAML file, e.g. examples/accelerate/ddp.yaml)")
    if accelerate_config is not None:
        _machines(accelerate_config)  # parses it: a broken file is refused before anything starts
    if num_processes is None or (num_processes == 1 and accelerate_config is None):
        return
    if is_distributed() or os.environ.get(LAUNCHED_ENV):
        raise PlaypenError("option --num-processes: this process is already one of a launched run's ranks "
                           "(accelerate launch); leave --num-processes out")
    import torch
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus and num_processes > gpus and accelerate_config is None:  # (a config may name other machines)
        raise PlaypenError(f"option --num-processes: {num_processes} processes need {num_processes} GPUs; "
                           f"{gpus} visible (one process per GPU)")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_arguments(playpen_args: Sequence[str], num_processes: Optional[int],
                     accelerate_config: Optional[str] = None, port: Optional[int] = None) -> list[str]:
    """``accelerate launch`` arguments that run ``python -m playpen PLAYPEN_ARGS`` on
    `num_processes` processes: data parallel (DDP) over the GPUs, or over CPU processes
    (gloo) where there is none; `accelerate_config` decides everything else (and the number
    of processes when `num_processes` is None)."""
    if accelerate_config is not None:
        args = ["--config_file", str(accelerate_config)]
        if num_processes is not None:
            args += ["--num_processes", str(num_processes)]
        if port is not None:
            args += ["--main_process_port", str(port)]
    else:
        num_processes = num_processes or 1
        args = ["--num_processes", str(num_processes), "--main_process_port", str(port or free_port())]
        threads = max(1, (os.cpu_count() or 1) // num_processes)
        args = ["--multi_gpu", *args, "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                "--num_cpu_threads_per_process", str(threads)]
    return [*args, "--module", "playpen", *playpen_args]


def launch(playpen_args: Sequence[str], num_processes: Optional[int], accelerate_config: Optional[str] = None) -> int:
    """Run ``playpen PLAYPEN_ARGS`` on `num_processes` processes and wait; the exit code
    (0; a rank's own code when one failed: 2 for a user error, 130/143 after a signal)."""
    import torch
    from accelerate.commands.launch import launch_command, launch_command_parser
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    info = tempfile.NamedTemporaryFile(prefix="playpen-run-", suffix=".json", delete=False)
    info.close()
    env = {LAUNCHED_ENV: "1", RUN_INFO_ENV: info.name}
    if not torch.cuda.is_available():
        env["ACCELERATE_USE_CPU"] = "1"  # gloo over CPU processes
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    port = None if accelerate_config is not None and _machines(accelerate_config) > 1 else free_port()
    parsed = launch_command_parser().parse_args(launch_arguments(playpen_args, num_processes, accelerate_config,
                                                                 port))
    relayed: list[int] = []
    try:
        with _signals_relayed(relayed):
            launch_command(parsed)
        return 0
    except ChildFailedError as e:
        return _report(e, num_processes, info.name, relayed[0] if relayed else None)
    except SignalException as e:
        run_dir = _run_dir(info.name)
        signum = int(e.sigval)
        print(f"playpen: interrupted by {signal.Signals(signum).name}: every rank was told to save and stop"
              f"{_resume_hint(run_dir)}", flush=True)
        return 128 + signum
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        Path(info.name).unlink(missing_ok=True)


@contextlib.contextmanager
def _signals_relayed(relayed: list):
    """While torchrun runs here, a Ctrl-C or SIGTERM goes on to every rank (they run in
    sessions of their own) and nothing else happens: each rank saves after its step and exits
    with 130/143, which this process then reports. torchrun's own handler would stop the
    ranks itself and kill them 30 s later, too soon for a long step's save."""
    from torch.distributed.elastic.multiprocessing import api as elastic
    original = getattr(elastic, "_terminate_process_handler", None)
    if original is None:  # another torch: its own handling (the ranks get the signal, 30 s)
        yield
        return

    def relay(signum, frame):
        import psutil
        relayed.append(signum)
        for child in psutil.Process().children():
            try:
                child.send_signal(signum)
            except psutil.Error:
                pass
        print(f"\n[playpen] {signal.Signals(signum).name}: every rank saves a checkpoint after its step and stops "
              f"(a second signal stops them at once)", flush=True)

    elastic._terminate_process_handler = relay
    try:
        yield
    finally:
        elastic._terminate_process_handler = original


def _machines(accelerate_config: str) -> int:
    """How many machines an accelerate config names (several: its own rendezvous port is kept;
    one: a free port, so that runs side by side never collide)."""
    from accelerate.commands.config.config_args import load_config_from_file
    try:
        return int(load_config_from_file(accelerate_config).num_machines or 1)
    except Exception as e:  # noqa: BLE001 - accelerate's own parse error, in one line
        raise PlaypenError(f"option --accelerate-config: {accelerate_config} is no accelerate config file "
                           f"({type(e).__name__}: {e})") from e


def _run_dir(info_file: str) -> Optional[Path]:
    return read_run_dir(info_file)


def _resume_hint(run_dir: Optional[Path]) -> str:
    if run_dir is None:
        return ""
    last = latest_checkpoint(run_dir)
    if last is None:
        return f"; no complete checkpoint in {run_dir} yet"
    return f"; last complete checkpoint: {last} (continue with --resume)"


def _report(error, num_processes: Optional[int], info_file: str, relayed: Optional[int] = None) -> int:
    """One line on the rank that failed first (`error`: torchrun's ChildFailedError; the
    others fail after it, stopped by torchrun); its exit code (128 + signal when killed).
    After a signal this process passed on (`relayed`), ranks that stopped are no failure."""
    stopped = (-signal.SIGTERM, -signal.SIGINT, 128 + signal.SIGTERM, 128 + signal.SIGINT)
    if relayed is not None and all(int(f.exitcode) in stopped for f in error.failures.values()):
        print(f"playpen: interrupted by {signal.Signals(relayed).name}: every rank saved a checkpoint and stopped"
              f"{_resume_hint(_run_dir(info_file))}", flush=True)
        return 128 + relayed
    # the first by time (whole seconds): on a tie, the one torchrun did not stop itself
    rank, failure = min(error.failures.items(),
                        key=lambda item: (item[1].timestamp, int(item[1].exitcode) in stopped, item[0]))
    code = int(failure.exitcode)
    if code == 2:  # a user error: the rank printed its one line already
        return 2
    if code in (130, 143):  # a signal reached the ranks; each saved and stopped
        print(f"playpen: rank {rank} stopped by {signal.Signals(code - 128).name}"
              f"{_resume_hint(_run_dir(info_file))}", flush=True)
        return code
    how = f"was killed by {failure.signal_name()}" if code < 0 else f"exited with code {code}"
    extra = " (out of memory?)" if code == -signal.SIGKILL else ""
    import sys
    of = f" of {num_processes}" if num_processes else ""
    print(f"playpen: error: rank {rank}{of} {how}{extra}, so the run stopped (its output is "
          f"above){_resume_hint(_run_dir(info_file))}", file=sys.stderr, flush=True)
    return 128 - code if code < 0 else code
