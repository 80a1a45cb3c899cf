"""Named game sets (in-domain, out-of-domain, ...) and a clemscore per set.

LM Playschool reports a model by its clemscore on the games it may train on, its clemscore
on games it never saw, and a score on static benchmarks: a gain on the first is only worth
as much as what the other two lost. A set is a name and a list of games; an entry is a game
name as ``-g`` takes it (``game``, ``source:game``, a game folder) or a clemcore game
selector object (``{"benchmark": ["2.0"]}``, ``{"main_game": "wordle"}``), matched the way
``clem run -g`` matches it, over the games playpen knows (``game_registry.json`` and
playpen's own; not the working-directory scan).

The sets live in a JSON file the user edits: ``--sets-file``, else ``./game_sets.json``, else
the default beside this module. A set's clemscore is clem eval's arithmetic over the set's
games (:func:`playpen.evaluation.average_row`).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence

from playpen.clem import clemgame
from playpen.errors import EvaluationError, PlaypenError
from playpen.evaluation import EvalTable, average_row
from playpen.registry import game_entries, read_json, resolve_game

SETS_FILE = "game_sets.json"
DEFAULT_SETS_FILE = Path(__file__).resolve().with_name(SETS_FILE)
DEFAULT_STATIC_TASKS = ("playpen_word_clues",)
KEYS = ("description", "sets", "static_tasks")


@dataclass(frozen=True)
class GameSets:
    """A validated sets file: set name -> its entries (names or selector objects)."""

    path: Path
    sets: Mapping[str, tuple]
    static_tasks: tuple[str, ...] = DEFAULT_STATIC_TASKS

    def check_names(self, names: Sequence[str]) -> None:
        unknown = [n for n in names if n not in self.sets]
        if unknown:
            raise EvaluationError(f"unknown game set '{unknown[0]}' in {self.path}: the sets are "
                                  f"{', '.join(self.sets)}")

    def games(self, name: str, cwd: Optional[Path] = None) -> list[str]:
        """The game names of one set, in file order, each once."""
        out: list[str] = []
        for entry in self.sets[name]:
            for game in _resolve_entry(entry, self.path, name, cwd):
                if game not in out:
                    out.append(game)
        return out

    def resolve(self, names: Sequence[str] | None = None, cwd: Optional[Path] = None) -> dict[str, list[str]]:
        """Set name -> game names for `names` (all sets when None)."""
        names = list(names) if names else list(self.sets)
        self.check_names(names)
        return {name: self.games(name, cwd) for name in names}


def sets_file(path: str | Path | None = None, cwd: Optional[Path] = None) -> Path:
    """The sets file in use: `path`, else ``./game_sets.json``, else playpen's default."""
    if path is not None:
        return Path(path)
    local = Path(cwd or Path.cwd()) / SETS_FILE
    return local if local.is_file() else DEFAULT_SETS_FILE


def load_game_sets(path: str | Path | None = None, cwd: Optional[Path] = None) -> GameSets:
    """Read and check a sets file; every mistake is one EvaluationError naming the file."""
    file = sets_file(path, cwd)
    if not file.is_file():
        raise EvaluationError(f"game sets file {file} does not exist (see docs/evaluation.md)")
    try:
        data = read_json(file)
    except PlaypenError as e:
        raise EvaluationError(f"game sets file {e}") from e
    if not isinstance(data, dict):
        raise EvaluationError(f"{file}: must be a JSON object with \"sets\" (name -> list of games)")
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise EvaluationError(f"{file}: unknown key '{unknown[0]}' (valid keys: {', '.join(KEYS)})")
    sets = data.get("sets")
    if not isinstance(sets, dict) or not sets:
        raise EvaluationError(f"{file}: \"sets\" must be a non-empty object of set name -> list of games")
    for name, entries in sets.items():
        if not name.strip():
            raise EvaluationError(f"{file}: a set name is empty")
        if not isinstance(entries, list) or not entries:
            raise EvaluationError(f"{file}: set '{name}' must be a non-empty list of game names or selector objects")
        for entry in entries:
            if not (isinstance(entry, str) and entry.strip()) and not (isinstance(entry, dict) and entry):
                raise EvaluationError(f"{file}: set '{name}': entry {json.dumps(entry)} is neither a game name "
                                      f"nor a selector object such as {{\"benchmark\": [\"2.0\"]}}")
    tasks = data.get("static_tasks", list(DEFAULT_STATIC_TASKS))
    if not isinstance(tasks, list) or not tasks or not all(isinstance(t, str) and t.strip() for t in tasks):
        raise EvaluationError(f"{file}: \"static_tasks\" must be a non-empty list of lm-eval task names or files")
    return GameSets(file, {name: tuple(entries) for name, entries in sets.items()}, tuple(tasks))


def _resolve_entry(entry, file: Path, set_name: str, cwd: Optional[Path]) -> list[str]:
    if isinstance(entry, str):
        try:
            resolve_game(entry, cwd)
        except PlaypenError as e:
            raise EvaluationError(f"{file}: set '{set_name}': {e}") from e
        return [entry]
    selector = json.dumps(entry)
    try:
        registry = clemgame().GameRegistry([clemgame().GameSpec.from_dict(dict(e.spec))
                                            for e in game_entries(cwd, scan_cwd=False)])
        specs = registry.get_game_specs_that_unify_with(selector, verbose=False)
    except ValueError as e:  # clemcore's "no games found matching"
        raise EvaluationError(f"{file}: set '{set_name}': no registered game matches the selector {selector}") from e
    except (KeyError, TypeError, AttributeError) as e:  # a game entry lacks a field the selector or clemcore needs
        raise EvaluationError(f"{file}: set '{set_name}': clemcore cannot match the selector {selector} "
                              f"against the registered games ({type(e).__name__}: {e})") from e
    return [spec.game_name for spec in specs]


def table_names(sets: Mapping[str, Sequence[str]], cwd: Optional[Path] = None) -> dict[str, list[str]]:
    """The names the games of `sets` have in a table (``source:game`` or a folder -> ``game``)."""
    return {name: [g if ":" not in g and "/" not in g else resolve_game(g, cwd).name for g in games]
            for name, games in sets.items()}


# ----------------------------------------------------------------------------- scores

@dataclass(frozen=True)
class SetScore:
    """One set's clemscore over the games of a table; `missing`: set games the table lacks
    (not played, or failed to load), which the score does not count."""

    name: str
    games: tuple[str, ...]
    num_episodes: int
    percent_played: float
    quality: float
    clemscore: float
    missing: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"games": list(self.games), "num_episodes": self.num_episodes,
                "percent_played": self.percent_played,
                "quality": None if math.isnan(self.quality) else self.quality,
                "clemscore": self.clemscore, "missing": list(self.missing)}


def set_scores(table: EvalTable, sets: Mapping[str, Sequence[str]]) -> dict[str, SetScore]:
    """Each set's clemscore from the rows of `table` (clem eval's macro average over the set's games)."""
    rows = {row.game: row for row in table.games}
    out = {}
    for name, games in sets.items():
        played = [rows[g] for g in games if g in rows]
        missing = tuple(g for g in games if g not in rows)
        if not played:
            out[name] = SetScore(name, tuple(games), 0, 0.0, math.nan, 0.0, missing)
            continue
        row = average_row(played, name)
        out[name] = SetScore(name, tuple(games), row.num_episodes, row.percent_played, row.quality,
                             row.clemscore, missing)
    return out


def sets_text(scores: Mapping[str, SetScore]) -> str:
    """The per-set table printed under the games' table."""
    lines = ["clemscore per game set (% played and quality averaged over the set's games, as clem eval does)",
             f"{'set':<24} {'games':>8} {'% played':>9} {'quality':>8} {'clemscore':>9}"]
    for s in scores.values():
        quality = "n/a" if math.isnan(s.quality) else f"{s.quality:.2f}"
        note = f"  (not played: {', '.join(s.missing)})" if s.missing else ""
        lines.append(f"{s.name:<24} {len(s.games) - len(s.missing):>8} {s.percent_played:>9.2f} {quality:>8} "
                     f"{s.clemscore:>9.2f}{note}")
    return "\n".join(lines)
