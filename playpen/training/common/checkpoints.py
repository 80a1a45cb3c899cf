"""Checkpoint folders of a run: which are complete, which to resume from, and rotation that
never loses the last complete one.

A checkpoint is complete when its ``trainer_state.json`` exists and parses: transformers
writes that file last, so a folder left by a crash or a kill in the middle of saving is
never picked. transformers' own rotation (``save_total_limit``) orders folders by
modification time and counts incomplete ones, so a kill during rotation could leave a
half-deleted folder that looks newest while the intact ones went; playpen turns it off
and rotates itself (:func:`rotate_checkpoints`) only after a new checkpoint is complete.
A folder is renamed out of the ``checkpoint-N`` namespace before it is deleted, so a
deletion cut short leaves a ``.deleting-checkpoint-N`` folder, never a broken checkpoint.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Optional

from playpen.errors import ResumeError
from playpen.files import write_json, write_text

_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
STATE_FILE = "trainer_state.json"
DELETING_PREFIX = ".deleting-"


def is_complete(folder: Path) -> bool:
    """``folder/trainer_state.json`` exists and is a JSON object (a write cut short is not)."""
    try:
        state = json.loads((Path(folder) / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(state, dict)


def _numbered(run_dir: Path) -> list[tuple[int, Path]]:
    if not run_dir.is_dir():
        return []
    found = []
    for child in run_dir.iterdir():
        match = _CHECKPOINT.match(child.name)
        if match and child.is_dir():
            found.append((int(match.group(1)), child))
    return sorted(found)


def checkpoints(run_dir: str | Path) -> list[Path]:
    """Complete ``checkpoint-N`` folders, oldest (lowest N) first."""
    return [path for _, path in _numbered(Path(run_dir)) if is_complete(path)]


def latest_checkpoint(run_dir: str | Path) -> Optional[Path]:
    found = checkpoints(run_dir)
    return found[-1] if found else None


def resume_checkpoint(run_dir: str | Path, resume: bool) -> Optional[str]:
    """The checkpoint to resume from (None for a fresh run); --resume without one is an error."""
    if not resume:
        return None
    last = latest_checkpoint(run_dir)
    if last is None:
        raise ResumeError(f"--resume: no complete checkpoint in {run_dir} (checkpoint-N with "
                          f"trainer_state.json); start without --resume")
    return str(last)


def checkpoint_step(path: str | Path) -> int:
    match = _CHECKPOINT.match(Path(path).name)
    return int(match.group(1)) if match else 0


def remove_checkpoint(folder: Path) -> None:
    """Delete a checkpoint folder so that no moment leaves a partial ``checkpoint-N``:
    rename first (atomic), then delete the renamed folder."""
    doomed = folder.with_name(DELETING_PREFIX + folder.name)
    shutil.rmtree(doomed, ignore_errors=True)
    os.replace(folder, doomed)
    shutil.rmtree(doomed, ignore_errors=True)


def remove_partial(run_dir: str | Path) -> list[str]:
    """Delete what interrupted saves and deletions left (incomplete ``checkpoint-N``
    folders, ``.deleting-*`` leftovers); only while no other process uses the run folder.
    Returns the names removed."""
    run_dir = Path(run_dir)
    removed = []
    for _, path in _numbered(run_dir):
        if not is_complete(path):
            remove_checkpoint(path)
            removed.append(path.name)
    if run_dir.is_dir():
        for child in run_dir.iterdir():
            if child.name.startswith(DELETING_PREFIX) and child.is_dir():
                shutil.rmtree(child, ignore_errors=True)
                removed.append(child.name)
    return removed


def rotate_checkpoints(run_dir: str | Path, keep: Optional[int], spare: Optional[Path] = None) -> list[str]:
    """Keep the `keep` newest complete checkpoints (by step) and `spare` (the best one so far
    of a run that stops on a dev split), remove older ones and any incomplete folder; call
    only right after a new checkpoint became complete. `keep` None or < 1: keep all.
    Returns the names removed."""
    removed = remove_partial(run_dir)
    if keep is None or keep < 1:
        return removed
    complete = [path for path in checkpoints(run_dir) if spare is None or path.name != Path(spare).name]
    for path in complete[:max(0, len(complete) - keep)]:
        remove_checkpoint(path)
        removed.append(path.name)
    return removed


def write_state(folder: Path, state: dict) -> None:
    """A checkpoint's ``trainer_state.json``, written last: the folder counts from then on."""
    write_json(Path(folder) / STATE_FILE, state, indent=1)


def read_state(folder: str | Path) -> dict:
    """A complete checkpoint's ``trainer_state.json`` ({} when missing or cut short)."""
    try:
        state = json.loads((Path(folder) / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def truncate_log(path: Path, step: int) -> None:
    """Drop the log's train steps after `step` (a resumed run does them again)."""
    if not path.exists():
        return
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = []
    for line in lines:
        try:
            if json.loads(line).get("step", 0) <= step:
                kept.append(line)
        except ValueError:  # a line cut short by a kill
            continue
    if len(kept) != len(lines):
        write_text(path, "".join(kept))
