"""Named splits of a game's held-out instances: a *dev* part to tune on and a *test* part played
once, read from a JSON file the user can write for their own games (the learning protocol's
``benchmarks/protocol-splits.json`` is one)::

    {"games": {"taboo": {"instances": "instances_protocol",
                         "dev": ["high_en/0", ...], "test": ["high_en/1", ...]}}}

An item is ``<experiment>/<game_id>`` of the game's instances file; ``"instances"`` names that
file (its stem in the game's ``in/``; default: the game's own). Other keys (``clusters``,
``train_instances``, the protocol's notes) are ignored here. ``playpen eval --split dev --splits
FILE`` plays only the dev items of each game (:func:`split_items`).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional, Sequence

from playpen.errors import EvaluationError

SPLITS = ("dev", "test")


def load_splits(path: str | Path) -> dict[str, dict]:
    """game -> its entry, from a splits file; EvaluationError (one line) for a missing or
    unreadable file and for an entry whose splits are not lists of item ids."""
    path = Path(path)
    if not path.is_file():
        raise EvaluationError(f"--splits {path}: no such file (a JSON file: games -> "
                              f"{{instances, dev: [items], test: [items]}})")
    try:
        games = json.loads(path.read_text(encoding="utf-8"))["games"]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
        raise EvaluationError(f"--splits {path}: not a splits file ({type(e).__name__}: {e}); expected "
                              f"{{\"games\": {{GAME: {{\"dev\": [...], \"test\": [...]}}}}}}") from e
    if not isinstance(games, dict):
        raise EvaluationError(f"--splits {path}: \"games\" is not an object of game -> splits")
    for game, entry in games.items():
        lists = {name: entry.get(name) for name in SPLITS if name in entry} if isinstance(entry, dict) else None
        if not lists or not all(isinstance(v, list) and all(isinstance(i, str) and "/" in i for i in v)
                                for v in lists.values()):
            raise EvaluationError(f"--splits {path}: game '{game}': expected dev and/or test as lists of "
                                  f"'<experiment>/<game_id>' items")
    return games


def split_items(path: str | Path, split: str, games: Sequence[str]) -> tuple[dict[str, list[str]], Optional[str]]:
    """(game -> the items of `split`, the instances file the games' entries name or None) for
    `games` (game names, as their specs call them). One line for an unknown split, a game
    the file does not split, or games whose entries name different instances files (their
    items are ids in different files: evaluate them in separate calls or pass -i)."""
    if split not in SPLITS:
        raise EvaluationError(f"option --split: '{split}' is not valid; expected one of {', '.join(SPLITS)}")
    entries = load_splits(path)
    unknown = [g for g in games if g not in entries]
    if unknown:
        raise EvaluationError(f"--splits {path}: no split for {', '.join(unknown)} (the file splits "
                              f"{', '.join(sorted(entries)) or 'no game'})")
    lacking = [g for g in games if split not in entries[g]]
    if lacking:
        raise EvaluationError(f"--splits {path}: {', '.join(lacking)} has no '{split}' split")
    files = {g: entries[g].get("instances") for g in games}
    if len(set(files.values())) > 1:
        named = ", ".join(f"{g}: {f or 'its own'}" for g, f in files.items())
        raise EvaluationError(f"--splits {path}: the games' splits are items of different instances files "
                              f"({named}); evaluate them in separate calls or pass -i")
    return {g: list(entries[g][split]) for g in games}, next(iter(files.values()), None)
