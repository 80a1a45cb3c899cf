"""Before -> after: what training changed in each game set's clemscore and in the statscore.

Most LM Playschool entries gained clemscore on the games they trained on while losing
out-of-domain clemscore or statscore; this table puts the three side by side. Each side is
a run folder of :func:`playpen.evaluation.suite.evaluate_suite` (``playpen-eval.json`` with
its ``"sets"``, ``playpen-static.json``) or one of those JSON files; a number only one side
has is shown with ``n/a`` on the other. A trainer calls :func:`compare_runs` with the run
folders of its base model and of its final checkpoint; ``playpen eval --compare A B`` does
the same from the command line.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from playpen.errors import EvaluationError
from playpen.evaluation import EVAL_FILE
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
class Comparison:
    before: str
    after: str
    rows: tuple[Change, ...]

    def row(self, name: str) -> Change:
        return next(r for r in self.rows if r.name == name)

    def to_dict(self) -> dict:
        return {"before": self.before, "after": self.after, "rows": [r.to_dict() for r in self.rows]}

    def to_text(self) -> str:
        def num(x: float, digits: int, signed: bool = False) -> str:
            return "n/a" if math.isnan(x) else (f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}")
        over = any(r.over_text() for r in self.rows)
        width = max([40] + [len(r.name) for r in self.rows])
        lines = [f"before: {self.before}", f"after:  {self.after}",
                 f"{'':<{width}} {'before':>9} {'after':>9} {'change':>9}" + "  over (before / after)" * over]
        lines += [(f"{r.name:<{width}} {num(r.before, r.digits):>9} {num(r.after, r.digits):>9} "
                   f"{num(r.delta, r.digits, True):>9}  {r.over_text()}").rstrip() for r in self.rows]
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


def compare_runs(before: str | Path, after: str | Path, out: Optional[str | Path] = None) -> Comparison:
    """The before -> after table of two evaluations; written as JSON to `out` when given
    (a folder gets ``playpen-compare.json``) with the text table beside it (``.txt``)."""
    first, second = numbers(read_results(before)), numbers(read_results(after))
    names = list(first) + [n for n in second if n not in first]
    missing = (math.nan, None)
    comparison = Comparison(str(before), str(after), tuple(
        Change(n, first.get(n, missing)[0], second.get(n, missing)[0], 2 if n.startswith("clemscore") else 4,
               (first.get(n, missing)[1], second.get(n, missing)[1]))
        for n in names))
    if out is not None:
        target = Path(out)
        target = target / COMPARE_FILE if target.is_dir() else target
        write_json(target, comparison.to_dict(), indent=1)
        target.with_suffix(".txt").write_text(comparison.to_text() + "\n", encoding="utf-8")
    return comparison
