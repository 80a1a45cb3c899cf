"""Writing files atomically: every JSON and JSON-lines file playpen writes goes through here.

A file is written to a temporary sibling and renamed into place, so a crash or a Ctrl-C
never leaves half a file where a complete one is expected. The temporary file gets the
permissions a plain ``open()`` would give (``0666`` minus the umask), not ``mkstemp``'s
private ``0600``.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Mapping


def _umask() -> int:
    mask = os.umask(0)
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
    """Write ``text`` to ``path`` atomically (temporary sibling + ``os.replace``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
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
