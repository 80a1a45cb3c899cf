"""Data-parallel runs: which process this is, and what only one of them does.

A trainer runs on N processes when started by ``accelerate launch`` (``playpen run FILE
--num-processes N`` calls it: :mod:`playpen.launch`). TRL's trainers already run on
accelerate, so gradients are synchronised by its DDP (or DeepSpeed) wrapper and a batch
is split by its data loader; this module only says who this process is and keeps
playpen's own side effects to one writer:

- **rank 0 alone** takes the run-folder lock, clears what an interrupted save left,
  rotates checkpoints (transformers saves them from rank 0 too), writes the step lines of
  ``playpen-log.jsonl``, ``playpen-run.json``, the learning curve and the pairs files,
  plays SFT demonstrations (the others wait, then read them) and runs the final
  evaluation;
- **every rank** plays its own share of the rollouts (GRPO: the groups TRL deals it; DPO:
  its share of the sampled instances, the pairs then gathered on every rank), writes its
  own records run folders (``rollout-<time>-<id>-rank<R>``) and its episodes' log lines
  (rank 0 into ``playpen-log.jsonl``, rank R > 0 into ``playpen-log.rank<R>.jsonl``): no
  file is ever written by two processes.

Who a process is comes from the environment the launcher sets (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``), so asking costs no import; the collectives (:func:`barrier`,
:func:`gather_objects`, :func:`any_rank`) go through accelerate's ``PartialState``.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator, Sequence, TypeVar

from playpen.errors import PlaypenError
from playpen.files import write_json

T = TypeVar("T")

RUN_INFO_ENV = "PLAYPEN_RUN_INFO"
"""A file the launcher names: rank 0 writes the run folder there, so that the launcher can
name the last complete checkpoint when a rank dies."""


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def world_size() -> int:
    """How many processes train together (1 outside ``accelerate launch``)."""
    return max(1, _env_int("WORLD_SIZE", 1))


def rank() -> int:
    """This process's rank among all of them (0 outside ``accelerate launch``)."""
    return _env_int("RANK", 0)


def local_rank() -> int:
    """This process's rank on its machine: the index of its GPU."""
    return _env_int("LOCAL_RANK", 0)


def is_distributed() -> bool:
    return world_size() > 1


def is_main() -> bool:
    """Rank 0: the one process that writes the run's shared files."""
    return rank() == 0


def rank_suffix() -> str:
    """``-rank<R>`` in a data-parallel run (for names every rank makes), else ``""``."""
    return f"-rank{rank()}" if is_distributed() else ""


def rank_file(path: str | Path) -> Path:
    """`path` for rank 0 (and outside data-parallel runs); ``<stem>.rank<R><suffix>`` beside
    it for rank R > 0."""
    path = Path(path)
    if is_main():
        return path
    return path.with_name(f"{path.stem}.rank{rank()}{path.suffix}")


def device_map() -> dict | None:
    """Where a model of this process goes: ``{"": LOCAL_RANK}`` (its own GPU) or ``{"": "cpu"}``
    in a data-parallel run; None otherwise (the backend's own choice: clemcore spreads a model
    over every visible GPU with ``device_map="auto"``, which data parallelism cannot use)."""
    if not is_distributed():
        return None
    import torch
    return {"": local_rank()} if torch.cuda.is_available() else {"": "cpu"}


def state():
    """accelerate's process state (initialises the process group on first use; gloo on a CPU)."""
    import torch
    from accelerate import PartialState
    return PartialState(cpu=not torch.cuda.is_available())


def barrier() -> None:
    """Wait until every rank is here (nothing outside a data-parallel run)."""
    if is_distributed():
        state().wait_for_everyone()


@contextlib.contextmanager
def main_first() -> Iterator[None]:
    """Rank 0 runs the block first; the other ranks run it once rank 0 is through (e.g.
    rank 0 plays and writes demonstrations, the others find them complete and read them).
    If rank 0 fails, the launcher stops the ranks still waiting."""
    if not is_distributed():
        yield
        return
    if not is_main():
        barrier()
    yield
    if is_main():
        barrier()


def gather_objects(value: T) -> list[T]:
    """Every rank's `value`, in rank order, on every rank (``[value]`` outside a data-parallel run)."""
    if not is_distributed():
        return [value]
    from accelerate.utils import gather_object
    state()
    return list(gather_object([value]))


def from_main(value: T) -> T:
    """Rank 0's `value` on every rank (`value` itself outside a data-parallel run)."""
    if not is_distributed():
        return value
    from accelerate.utils import broadcast_object_list
    state()
    box = [value if is_main() else None]
    broadcast_object_list(box, from_process=0)
    return box[0]


def gather_columns(columns: dict[str, list]) -> tuple[dict[str, list], slice]:
    """Every rank's rows (`columns`: equal-length lists by name) joined in rank order on every
    rank, and the slice of this rank's own rows in them."""
    size = len(next(iter(columns.values()), []))
    if not is_distributed():
        return dict(columns), slice(0, size)
    parts = gather_objects(dict(columns))
    sizes = [len(next(iter(part.values()), [])) for part in parts]
    start = sum(sizes[:rank()])
    joined = {key: [value for part in parts for value in part[key]] for key in columns}
    return joined, slice(start, start + size)


def max_over_ranks(value: int) -> int:
    """The largest of every rank's `value`, on every rank."""
    if not is_distributed():
        return int(value)
    import torch
    import torch.distributed as dist
    tensor = torch.tensor([int(value)], device=state().device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return int(tensor.item())


def any_rank(flag: bool) -> bool:
    """True on every rank when `flag` is true on any of them (a stop request)."""
    return bool(max_over_ranks(1 if flag else 0))


def shard(items: Sequence[T]) -> list[T]:
    """This rank's contiguous share of `items` (sizes differ by at most one; rank order =
    item order, so gathering the shards gives `items` back)."""
    n, size, me = len(items), world_size(), rank()
    start, stop = me * n // size, (me + 1) * n // size
    return list(items[start:stop])


def check_groups(groups_per_step: int, processes: int | None = None) -> None:
    """GRPO: every rank plays and trains whole groups, ``--groups-per-step / N`` of them
    (PlaypenError otherwise; `processes` default: this run's)."""
    processes = processes or world_size()
    if groups_per_step % processes:
        raise PlaypenError(f"option --groups-per-step: {groups_per_step} groups cannot be shared by "
                           f"{processes} processes; use a multiple of {processes} (each process plays "
                           f"and trains whole groups)")


@contextlib.contextmanager
def generating_model(trainer):
    """The policy a TRL `trainer` generates rollouts with: its model out of the DDP wrapper
    (a data-parallel run), DeepSpeed ZeRO-3's partitioned weights gathered meanwhile (TRL's
    ``unwrap_model_for_generation``); a trainer without an accelerator: its model."""
    accelerator, wrapped = getattr(trainer, "accelerator", None), getattr(trainer, "model_wrapped", None)
    if accelerator is None or wrapped is None:
        yield wrapped or trainer.model
        return
    from trl.models.utils import unwrap_model_for_generation
    args = getattr(trainer, "args", None)
    with unwrap_model_for_generation(wrapped, accelerator,
                                     gather_deepspeed3_params=getattr(args, "ds3_gather_for_generation", True),
                                     gradient_checkpointing_kwargs=getattr(args, "gradient_checkpointing_kwargs",
                                                                           None)) as model:
        yield model


def record_run_dir(run_dir: str | Path) -> None:
    """Rank 0 tells the launcher (``$PLAYPEN_RUN_INFO``) which run folder it trains into."""
    target = os.environ.get(RUN_INFO_ENV)
    if not target or not is_main():
        return
    try:
        write_json(Path(target), {"run_dir": str(Path(run_dir).resolve())})
    except OSError:  # the launcher's note is a courtesy; the run does not depend on it
        pass


def read_run_dir(info_file: str | Path) -> Path | None:
    """The run folder rank 0 recorded in `info_file` (None when it recorded none)."""
    import json
    try:
        return Path(json.loads(Path(info_file).read_text(encoding="utf-8"))["run_dir"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def describe() -> str:
    """``rank R/N`` for messages."""
    return f"rank {rank()}/{world_size()}"


__all__ = ["world_size", "rank", "local_rank", "is_distributed", "is_main", "rank_suffix", "rank_file",
           "device_map", "state", "barrier", "main_first", "gather_objects", "from_main", "gather_columns", "max_over_ranks", "any_rank",
           "shard", "check_groups", "generating_model", "record_run_dir", "read_run_dir", "describe", "RUN_INFO_ENV"]
