"""Writing files atomically, and locking a folder: every JSON and JSON-lines file playpen
writes goes through here.

A file is written to a temporary sibling and renamed into place, so a crash or a Ctrl-C
never leaves half a file where a complete one is expected. The temporary file gets the
permissions a plain ``open()`` would give (``0666`` minus the umask), not ``mkstemp``'s
private ``0600``. :class:`FolderLock` keeps two processes from writing one folder.
"""
from __future__ import annotations

import fcntl
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

from playpen.errors import WRITE_ERRNOS, WriteError, write_error


def _umask() -> int:
    """The process umask, read without changing it where the OS tells (``os.umask`` alone
    would set it to 0 for a moment, which other threads' files would get)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _json_default(value: Any):
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (set, tuple)):
        return list(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def finite(value: Any) -> Any:
    """NaN -> None, recursively, so that a file is strict JSON."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, Mapping):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def write_text(path: str | Path, text: str, *, sync: bool = False) -> Path:
    """Write ``text`` to ``path`` atomically (temporary sibling + ``os.replace``); a full
    disk or a folder without write permission is a :class:`~playpen.errors.WriteError`
    naming ``path`` (an earlier file there is kept)."""
    path = Path(path)
    blocking = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        raise WriteError(f"cannot write {path}: {blocking} is a file, not a folder")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        if e.errno in WRITE_ERRNOS:
            raise write_error(e, path) from e
        raise
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError) and e.errno in WRITE_ERRNOS:
            raise write_error(e, path) from e
        raise
    return path


def write_json(path: str | Path, data: Any, *, indent: int = 2, sync: bool = False) -> Path:
    """Write ``data`` as JSON atomically (paths, sets and datetimes are converted)."""
    return write_text(path, json.dumps(data, indent=indent, ensure_ascii=False, default=_json_default),
                      sync=sync)


def write_jsonl(records: Iterable[Mapping], path: str | Path) -> Path:
    """Write one JSON object per line, atomically."""
    lines = [json.dumps(record, ensure_ascii=False, default=_json_default) + "\n" for record in records]
    return write_text(path, "".join(lines))



def read_json_rows(path: str | Path, error: type[Exception] = ValueError, what: str = "rows") -> list:
    """The rows of a JSON-lines file (one value per non-blank line) or, for a ``.json``
    file, its top-level list. Malformed JSON raises ``error`` naming ``path:line``; a
    ``.json`` file that holds no list raises ``error`` saying what was expected (``what``)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise error(f"cannot read '{path}': {e}") from e
    if path.suffix == ".json":
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as e:
            raise error(f"{path}:{e.lineno}: malformed JSON: {e.msg}") from e
        if not isinstance(rows, list):
            raise error(f"{path}: expected a list of {what}")
        return rows
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise error(f"{path}:{number}: malformed JSON: {e.msg}") from e
    return rows

# ----------------------------------------------------------------------------- locks

class FolderLock:
    """An exclusive, advisory lock on a folder for this process: ``fcntl.flock`` on
    ``<folder>/.playpen.lock``, which records the holder's PID and command line. The
    operating system releases it when the process ends, however it ends; :meth:`release`
    also removes the file. With ``take_over=True`` a lock this process already holds on the
    folder through another object (one that never released, e.g. after an exception) is
    released and taken over instead of refused."""

    FILE = ".playpen.lock"
    _held: dict[str, "FolderLock"] = {}

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.path = self.folder / self.FILE
        self._fd: Optional[int] = None

    def acquire(self, wait: bool = False, take_over: bool = False) -> bool:
        """Take the lock (creating the folder); False when another holder has it, or with
        `wait`, wait until it is released."""
        key = str(self.folder.resolve())
        previous = self._held.get(key)
        if take_over and previous is not None and previous is not self:
            previous.release()
        self.folder.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return False
            try:  # the holder may have released and removed the file between our open and flock
                if os.fstat(fd).st_ino == os.stat(self.path).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(fd)
        info = {"pid": os.getpid(), "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
                "started": time.strftime("%Y-%m-%d %H:%M:%S")}
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(info).encode())
        self._fd = fd
        self._held[key] = self
        return True

    def holder(self) -> dict:
        """What the holder wrote (``pid``, ``command``, ``started``); {} when unknown."""
        try:
            info = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return info if isinstance(info, dict) else {}

    def release(self) -> None:
        if self._fd is None:
            return
        self.path.unlink(missing_ok=True)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None
        self._held.pop(str(self.folder.resolve()), None)

    @property
    def held(self) -> bool:
        return self._fd is not None
