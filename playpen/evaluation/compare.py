"""Before -> after: what training changed in each game set's clemscore and in the statscore.

Most LM Playschool entries gained clemscore on the games they trained on while losing
out-of-domain clemscore or statscore; this table puts the three side by side. Each side is
a run folder of :func:`playpen.evaluation.suite.evaluate_suite` (``playpen-eval.json`` with
its ``"sets"``, ``playpen-static.json``) or one of those JSON files; a number only one side
has is shown with ``n/a`` on the other. A trainer calls :func:`compare_runs` with the run
folders of its base model and of its final checkpoint; ``playpen eval --compare A B`` does
the same from the command line.

Beside the table, each game both sides played is compared item by item (an item is
``<experiment>/<game_id>``, scored as the learning protocol scores it: the Main Score of a
played episode, 0 for an aborted one): the mean change with a 95 % bootstrap interval
clustered by item (:func:`~playpen.evaluation.statistics.clustered_interval`) and the exact
paired sign-flip p (:func:`~playpen.evaluation.statistics.sign_flip_test`). A clemscore moves
by chance on a few dozen episodes; these say whether the change is more than that.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from playpen.errors import EvaluationError
from playpen.evaluation import EVAL_FILE, read_episode_scores
from playpen.evaluation.statistics import clustered_interval, sign_flip_test
from playpen.evaluation.static_suite import STATIC_FILE
from playpen.files import write_json

COMPARE_FILE = "playpen-compare.json"


@dataclass(frozen=True)
class Change:
    """One number before and after (NaN: that side does not have it)."""

    name: str
    before: float
    after: float
    digits: int = 2
    """Shown with this many decimals: clemscores are 0-100, the statscore a fraction."""
    over: tuple[Optional[int], Optional[int]] = (None, None)
    """How many episodes (clemscores) or questions (static) each side's number is over, where known:
    a capped evaluation is a sample, and the reader should see how small."""

    @property
    def delta(self) -> float:
        return self.after - self.before

    @property
    def unit(self) -> str:
        return "episodes" if self.name.startswith("clemscore") else "questions"

    def over_text(self) -> str:
        """``20 episodes``, or ``20 / 90 episodes`` when the sides differ; '' when unknown."""
        known = [n for n in self.over if n is not None]
        if not known:
            return ""
        sides = [("?" if n is None else str(n)) for n in self.over]
        return f"{sides[0] if sides[0] == sides[1] else ' / '.join(sides)} {self.unit}"

    def to_dict(self) -> dict:
        def num(x):
            return None if math.isnan(x) else round(x, 4)
        out = {"name": self.name, "before": num(self.before), "after": num(self.after), "change": num(self.delta)}
        if any(n is not None for n in self.over):
            out["over"] = {"before": self.over[0], "after": self.over[1], "unit": self.unit}
        return out


@dataclass(frozen=True)
class PairedGame:
    """One game's item-by-item change: over the ``items`` both sides played (of
    ``before_items`` and ``after_items``), the mean change of the item score, its clustered
    interval and the two-sided sign-flip p (NaN without a paired item)."""

    game: str
    items: int
    before_items: int
    after_items: int
    mean_change: float = math.nan
    low: float = math.nan
    high: float = math.nan
    p_value: float = math.nan
    p_method: str = ""
    level: float = 0.95

    def to_dict(self) -> dict:
        def num(x):
            return None if math.isnan(x) else round(x, 6)
        return {"game": self.game, "items": self.items, "before_items": self.before_items,
                "after_items": self.after_items, "mean_change": num(self.mean_change),
                "interval": [num(self.low), num(self.high)], "level": self.level,
                "sign_flip_p": num(self.p_value), "p_method": self.p_method}

    def to_text(self, width: int) -> str:
        counts = "" if self.before_items == self.after_items == self.items else \
            f" (before {self.before_items}, after {self.after_items})"
        if not self.items:
            return f"{self.game:<{width}} {'n/a':>9}  {'':<18}  {'':<11}  no item played by both{counts}"
        interval = f"[{self.low:+.2f}, {self.high:+.2f}]"
        p = f"{self.p_value:.4g}" + ("" if self.p_method == "exact" else " (mc)")
        return f"{self.game:<{width}} {self.mean_change:>+9.2f}  {interval:<18}  {p:<11}  {self.items} paired{counts}"


@dataclass(frozen=True)
class Comparison:
    before: str
    after: str
    rows: tuple[Change, ...]
    games: tuple[PairedGame, ...] = ()

    def row(self, name: str) -> Change:
        return next(r for r in self.rows if r.name == name)

    def to_dict(self) -> dict:
        out = {"before": self.before, "after": self.after, "rows": [r.to_dict() for r in self.rows]}
        if self.games:
            out["paired"] = [g.to_dict() for g in self.games]
        return out

    def to_text(self) -> str:
        def num(x: float, digits: int, signed: bool = False) -> str:
            return "n/a" if math.isnan(x) else (f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}")
        over = any(r.over_text() for r in self.rows)
        width = max([40] + [len(r.name) for r in self.rows])
        lines = [f"before: {self.before}", f"after:  {self.after}",
                 f"{'':<{width}} {'before':>9} {'after':>9} {'change':>9}" + "  over (before / after)" * over]
        lines += [(f"{r.name:<{width}} {num(r.before, r.digits):>9} {num(r.after, r.digits):>9} "
                   f"{num(r.delta, r.digits, True):>9}  {r.over_text()}").rstrip() for r in self.rows]
        if self.games:
            width = max([16] + [len(g.game) for g in self.games])
            lines += ["", "per game, item by item (an item: <experiment>/<game_id>; its score: the Main Score of a "
                          "played episode, 0 if aborted;", "the interval resamples items; p: two-sided sign-flip):",
                      f"{'game':<{width}} {'change':>9}  {'95 % interval':<18}  {'sign-flip p':<11}  items"]
            lines += [g.to_text(width) for g in self.games]
        return "\n".join(lines)


def read_results(path: str | Path) -> dict:
    """``{"eval": playpen-eval.json or None, "static": playpen-static.json or None}`` of a run
    folder or of one such file; EvaluationError when there is neither."""
    path = Path(path)
    if not path.exists():
        raise EvaluationError(f"'{path}' does not exist (expected a results folder of `playpen eval` or its "
                              f"{EVAL_FILE} / {STATIC_FILE})")
    files = {"eval": path / EVAL_FILE, "static": path / STATIC_FILE} if path.is_dir() else \
        {"static" if path.name == STATIC_FILE or _is_static(path) else "eval": path}
    out: dict = {"eval": None, "static": None}
    for kind, file in files.items():
        if file.is_file():
            try:
                out[kind] = json.loads(file.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
                raise EvaluationError(f"{file}: not a readable results file ({e})") from e
            if not isinstance(out[kind], dict):
                raise EvaluationError(f"{file}: not a results file of `playpen eval` (not a JSON object)")
    if out["eval"] is None and out["static"] is None:
        raise EvaluationError(f"'{path}' holds neither {EVAL_FILE} nor {STATIC_FILE}: not a results folder "
                              f"of `playpen eval`")
    return out


def _is_static(path: Path) -> bool:
    try:
        return "statscore" in json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, TypeError):
        return False


def numbers(results: dict) -> dict[str, tuple[float, Optional[int]]]:
    """Row name -> (value, episodes or questions it is over, None where unknown): each set's
    clemscore, the clemscore of all games played, the statscore and each static task's
    primary metric."""
    out: dict[str, tuple[float, Optional[int]]] = {}
    clem, static = results.get("eval"), results.get("static")
    if clem:
        for name, s in (clem.get("sets") or {}).items():
            out[f"clemscore {name}"] = _num(s.get("clemscore")), _count(s.get("num_episodes"))
        out["clemscore (all games played)"] = (_num(clem.get("clemscore")),
                                               _count((clem.get("overall") or {}).get("num_episodes")))
    if static:
        tasks = static.get("tasks", [])
        counts = [_count(t.get("num_samples")) for t in tasks]
        out["statscore"] = (_num(static.get("statscore")),
                            sum(counts) if counts and None not in counts else None)
        for task, count in zip(tasks, counts):
            out[f"  {task['task']} ({task['metric']})"] = _num(task.get("value")), count
    return out


def _num(value) -> float:
    return float(value) if isinstance(value, (int, float)) else math.nan


def _count(value) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def item_scores(run_dir: str | Path) -> dict[str, dict[str, float]]:
    """game -> item (``<experiment>/<game_id>``) -> score of every episode in a run folder: the
    Main Score of a played episode, 0 for an aborted or unscored one."""
    out: dict[str, dict[str, float]] = {}
    for s in read_episode_scores(Path(run_dir)):
        game_id = s["episode"].rpartition("_")[2]  # instance_<game_id> (clemcore), episode_<n> before it
        game_id = str(int(game_id)) if game_id.isdigit() else game_id  # as a splits file names it: 00003 -> 3
        main = s["Main Score"]
        played = not s["Aborted"] and isinstance(main, (int, float)) and not math.isnan(main)
        out.setdefault(s["game"], {})[f"{s['experiment']}/{game_id}"] = float(main) if played else 0.0
    return out


def paired_games(before: str | Path, after: str | Path, *, resamples: int = 2000,
                 seed: int = 0) -> tuple[PairedGame, ...]:
    """The item-by-item change of every game that both run folders hold episodes of."""
    first, second = item_scores(before), item_scores(after)
    out = []
    for game in sorted(set(first) & set(second)):
        items = sorted(set(first[game]) & set(second[game]))
        counts = len(items), len(first[game]), len(second[game])
        if not items:
            out.append(PairedGame(game, *counts))
            continue
        changes = {(0, item): second[game][item] - first[game][item] for item in items}
        interval = clustered_interval(changes, resamples=resamples, seed=seed)
        test = sign_flip_test(list(changes.values()))
        out.append(PairedGame(game, *counts, interval.mean, interval.low, interval.high, test.p_value, test.method,
                              interval.level))
    return tuple(out)


def _run_folder(path: str | Path) -> Path:
    path = Path(path)
    return path if path.is_dir() else path.parent


def compare_runs(before: str | Path, after: str | Path, out: Optional[str | Path] = None) -> Comparison:
    """The before -> after table of two evaluations, with the item-by-item change of each game
    both played (:func:`paired_games`; a results file stands for the run folder it is in);
    written as JSON to `out` when given (a folder gets ``playpen-compare.json``) with the text
    table beside it (``.txt``)."""
    first, second = numbers(read_results(before)), numbers(read_results(after))
    names = list(first) + [n for n in second if n not in first]
    missing = (math.nan, None)
    comparison = Comparison(str(before), str(after), tuple(
        Change(n, first.get(n, missing)[0], second.get(n, missing)[0], 2 if n.startswith("clemscore") else 4,
               (first.get(n, missing)[1], second.get(n, missing)[1]))
        for n in names), paired_games(_run_folder(before), _run_folder(after)))
    if out is not None:
        target = Path(out)
        target = target / COMPARE_FILE if target.is_dir() else target
        write_json(target, comparison.to_dict(), indent=1)
        target.with_suffix(".txt").write_text(comparison.to_text() + "\n", encoding="utf-8")
    return comparison
