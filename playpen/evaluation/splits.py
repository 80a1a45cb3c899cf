"""Named splits of a game's instances, read from a JSON file the user can write for their own
games (the learning protocol's ``benchmarks/protocol-splits.json`` is one)::

    {"games": {"taboo": {"instances": "instances_protocol", "train_instances": "instances_train",
                         "dev": ["high_en/0", ...], "test": ["high_en/1", ...],
                         "words24": ["high_en/3", ...]}}}

An item is ``<experiment>/<game_id>``; every key of an entry whose value is a list of items is
a split, the other keys (``instances``, ``train_instances``, ``content``, ``clusters``, notes)
are not. *dev* and *test* are held out: their items are ids of the ``"instances"`` file (its
stem in the game's ``in/``; default: the game's own). Any other split is a training split:
its items are ids of the ``"train_instances"`` file, else of the run's ``--train-instances``.

``playpen eval --split dev --splits FILE`` plays only the dev items of each game
(:func:`split_items`); ``playpen run ... --split words24 --splits FILE`` trains only on the
split's items (:func:`training_items`), and never on an item the file holds out.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional, Sequence

from playpen.envs.loading import game_instance_rows
from playpen.errors import EvaluationError
from playpen.registry import game_spec

HELD_OUT = ("dev", "test")


def is_items(value) -> bool:
    """A split's value: a list of ``<experiment>/<game_id>`` strings."""
    return isinstance(value, list) and all(isinstance(i, str) and "/" in i for i in value)


def split_names(entry: dict) -> list[str]:
    """The splits of a game's entry: its keys whose values are lists."""
    return [name for name, value in entry.items() if isinstance(value, list)]


def load_splits(path: str | Path) -> dict[str, dict]:
    """game -> its entry, from a splits file; EvaluationError (one line) for a missing or
    unreadable file, an entry without splits, and a split that is not a list of item ids."""
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
        names = split_names(entry) if isinstance(entry, dict) else []
        bad = next((n for n in names if not is_items(entry[n])), None)
        if not names or bad is not None:
            raise EvaluationError(f"--splits {path}: game '{game}': expected splits (dev, test, ...) as lists of "
                                  f"'<experiment>/<game_id>' items" + f" ('{bad}' is not one)" * (bad is not None))
    return games


def defined_splits(entries: dict[str, dict]) -> str:
    """The split names a file defines, for an error message."""
    return ", ".join(dict.fromkeys(n for entry in entries.values() for n in split_names(entry))) or "none"


def split_entries(path: str | Path, split: str, games: Sequence[str]) -> dict[str, dict]:
    """The entries of `games` in the file, each with `split`; one line for a game the file does
    not split, and for a split one of them lacks (naming the splits the file defines)."""
    entries = load_splits(path)
    unknown = [g for g in games if g not in entries]
    if unknown:
        raise EvaluationError(f"--splits {path}: no split for {', '.join(unknown)} (the file splits "
                              f"{', '.join(sorted(entries)) or 'no game'})")
    lacking = [g for g in games if split not in split_names(entries[g])]
    if lacking:
        raise EvaluationError(f"--splits {path}: {', '.join(lacking)} has no '{split}' split (the file defines "
                              f"{defined_splits({g: entries[g] for g in games})})")
    return {g: entries[g] for g in games}


def split_items(path: str | Path, split: str, games: Sequence[str]) -> tuple[dict[str, list[str]], Optional[str]]:
    """(game -> the items of held-out `split` (dev or test), the instances file the games'
    entries name or None) for `games` (game names, as their specs call them). One line for
    another split, a game the file does not split, or games whose entries name different
    instances files (their items are ids in different files: evaluate them in separate calls
    or pass -i)."""
    if split not in HELD_OUT:
        entries = load_splits(path)
        raise EvaluationError(f"option --split: '{split}' is not valid; expected dev or test (the held-out splits; "
                              f"{path} defines {defined_splits(entries)})")
    entries = split_entries(path, split, games)
    files = {g: entries[g].get("instances") for g in games}
    if len(set(files.values())) > 1:
        named = ", ".join(f"{g}: {f or 'its own'}" for g, f in files.items())
        raise EvaluationError(f"--splits {path}: the games' splits are items of different instances files "
                              f"({named}); evaluate them in separate calls or pass -i")
    return {g: list(entries[g][split]) for g in games}, next(iter(files.values()), None)


def training_items(path: str | Path, split: str, games: Sequence[str], train_instances: str) -> dict[str, list[str]]:
    """game -> the items of `split` that a run training `games` on ``in/<train_instances>.json``
    plays. One line for: a game the file does not split or a split it lacks; a split whose items
    are ids of another file than the run's; items that file does not hold; an empty split; and
    (the file being the held-out one) items the file lists as dev or test."""
    out = {}
    for game, entry in split_entries(path, split, games).items():
        held_out = game_spec(game, entry.get("instances")).instances
        file = held_out if split in HELD_OUT else entry.get("train_instances") or train_instances
        if file != train_instances:
            raise EvaluationError(f"--splits {path}: the '{split}' items of {game} are ids of in/{file}.json, the run "
                                  f"trains on in/{train_instances}.json (pass --train-instances {file})")
        items = list(dict.fromkeys(entry[split]))
        if not items:
            raise EvaluationError(f"--splits {path}: {game}'s '{split}' split lists no items")
        known = {f"{r['experiment']['name']}/{r['game_instance']['game_id']}"
                 for r in game_instance_rows(game_spec(game, file))}
        missing = [i for i in items if i not in known]
        if missing:
            raise EvaluationError(f"--splits {path}: {len(missing)} of {game}'s '{split}' items are not in "
                                  f"in/{file}.json (first: {missing[0]})")
        if file == held_out:
            kept = {i for name in HELD_OUT if is_items(entry.get(name)) for i in entry[name]}
            overlap = [i for i in items if i in kept]
            if overlap:
                raise EvaluationError(f"--splits {path}: {len(overlap)} of {game}'s '{split}' items are dev or test "
                                      f"items of in/{file}.json, the held-out file: training on them is refused")
        out[game] = items
    return out
