"""A small, describable language about binary grids, used by the programmatic players.

The giver picks the simplest clause(s) true of the target and false of each
distractor ("row 1 is completely filled", "the cell in row 3, column 2 is empty");
the follower reads such clauses back out of free text and picks the grid that
satisfies most of them.
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from refgame_grids import SIZE, Grid


@dataclass(frozen=True)
class Clause:
    """One checkable statement about a grid.

    kind: "row" / "column" (a whole line is full or empty), "row_count" /
    "column_count" (a line has `value` filled cells), "total" (the grid has `value`
    filled cells), "cell" (cell (`index`, `index2`) is filled when `value`).
    Indices are 0-based here and 1-based in text.
    """
    kind: str
    index: int = 0
    index2: int = 0
    value: int | bool = True

    def holds(self, grid: Grid) -> bool:
        if self.kind == "cell":
            return grid[self.index][self.index2] == bool(self.value)
        if self.kind == "total":
            return sum(map(sum, grid)) == self.value
        line = _line(grid, self.kind.startswith("row"), self.index)
        if self.kind in ("row", "column"):
            return all(line) if self.value else not any(line)
        return sum(line) == self.value

    def render(self) -> str:
        if self.kind == "cell":
            state = "filled" if self.value else "empty"
            return f"the cell in row {self.index + 1}, column {self.index2 + 1} is {state}"
        if self.kind == "total":
            return f"there are exactly {self.value} filled cells in total"
        line = "row" if self.kind.startswith("row") else "column"
        if self.kind in ("row", "column"):
            state = "filled" if self.value else "empty"
            return f"{line} {self.index + 1} is completely {state}"
        noun = "cell" if self.value == 1 else "cells"
        return f"{line} {self.index + 1} has exactly {self.value} filled {noun}"


def _line(grid: Grid, is_row: bool, index: int) -> tuple:
    return grid[index] if is_row else tuple(grid[r][index] for r in range(SIZE))


def true_clauses(grid: Grid) -> list[Clause]:
    """All clauses that hold for `grid`, simplest (most natural) first."""
    clauses = []
    for kind in ("row", "column"):
        for i in range(SIZE):
            count = sum(_line(grid, kind == "row", i))
            if count in (0, SIZE):
                clauses.append(Clause(kind, i, value=count == SIZE))
    for kind in ("row_count", "column_count"):
        for i in range(SIZE):
            count = sum(_line(grid, kind == "row_count", i))
            if 0 < count < SIZE:
                clauses.append(Clause(kind, i, value=count))
    clauses.append(Clause("total", value=sum(map(sum, grid))))
    for r, c in itertools.product(range(SIZE), range(SIZE)):
        clauses.append(Clause("cell", r, c, value=grid[r][c]))
    return clauses


def describe(target: Grid, distractors: list[Grid]) -> list[Clause]:
    """The shortest list of clauses true of `target` that rules out every distractor
    (distractors identical to the target cannot be ruled out and are ignored)."""
    distractors = [d for d in distractors if d != target]
    candidates = true_clauses(target)
    for size in range(1, len(distractors) + 1):
        for combo in itertools.combinations(candidates, size):
            if all(any(not clause.holds(d) for clause in combo) for d in distractors):
                return list(combo)
    return []


def render_expression(clauses: list[Clause]) -> str:
    if not clauses:
        return "The grid that looks exactly like the target."
    return "The grid where " + " and ".join(c.render() for c in clauses) + "."


# --- reading clauses back from text -------------------------------------------------

_NUMBER_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5,
    "1st": 1, "2nd": 2, "3rd": 3, "4th": 4, "5th": 5,
}
_NUM = r"([0-9]{1,2}|zero|one|two|three|four|five|first|second|third|fourth|fifth|1st|2nd|3rd|4th|5th)"
_STATE = r"(?:completely |fully |entirely |totally |all )?(filled|full|empty|blank)"

_CELL_PATTERNS = [
    re.compile(rf"row (?:number )?{_NUM},? (?:and )?col(?:umn)? (?:number )?{_NUM}\)? (?:is|are) {_STATE}"),
    re.compile(rf"col(?:umn)? (?:number )?{_NUM},? (?:and )?row (?:number )?{_NUM}\)? (?:is|are) {_STATE}"),
]
_LINE_PATTERN = re.compile(rf"\b(row|col(?:umn)?) (?:number )?{_NUM} (?:is|are) {_STATE}")
_LINE_ORDINAL_PATTERN = re.compile(rf"\b{_NUM} (row|col(?:umn)?) (?:is|are) {_STATE}")
_COUNT_PATTERN = re.compile(rf"\b(row|col(?:umn)?) (?:number )?{_NUM} (?:has|contains) (?:exactly )?{_NUM} filled")
_TOTAL_PATTERN = re.compile(rf"(?:exactly )?{_NUM} filled cells in total")


def _number(word: str) -> int | None:
    if word.isdigit():
        return int(word)
    return _NUMBER_WORDS.get(word)


def _index(word: str) -> int | None:
    n = _number(word)
    return n - 1 if n is not None and 1 <= n <= SIZE else None


def read_clauses(text: str) -> list[Clause]:
    """Every clause of the language found in `text` (any case, any surrounding words);
    malformed or out-of-range mentions are skipped."""
    text = " ".join(text.lower().replace("-", " ").split())
    clauses = []
    for pattern, row_first in zip(_CELL_PATTERNS, (True, False)):
        for m in pattern.finditer(text):
            a, b = _index(m.group(1)), _index(m.group(2))
            if a is not None and b is not None:
                r, c = (a, b) if row_first else (b, a)
                clauses.append(Clause("cell", r, c, value=m.group(3) in ("filled", "full")))
        text = pattern.sub(" ", text)
    for m in _COUNT_PATTERN.finditer(text):
        i, n = _index(m.group(2)), _number(m.group(3))
        if i is not None and n is not None:
            clauses.append(Clause("row_count" if m.group(1) == "row" else "column_count", i, value=n))
    for m in _LINE_PATTERN.finditer(text):
        i = _index(m.group(2))
        if i is not None:
            clauses.append(Clause("row" if m.group(1) == "row" else "column", i,
                                  value=m.group(3) in ("filled", "full")))
    for m in _LINE_ORDINAL_PATTERN.finditer(text):
        i = _index(m.group(1))
        if i is not None:
            clauses.append(Clause("row" if m.group(2) == "row" else "column", i,
                                  value=m.group(3) in ("filled", "full")))
    for m in _TOTAL_PATTERN.finditer(text):
        n = _number(m.group(1))
        if n is not None:
            clauses.append(Clause("total", value=n))
    return clauses


def resolve(expression: str, grids: list[Grid]) -> int | None:
    """Index of the grid that satisfies most clauses of `expression` (the first such
    grid on ties), or None when the expression contains no readable clause."""
    clauses = read_clauses(expression)
    if not clauses or not grids:
        return None
    scores = [sum(clause.holds(grid) for clause in clauses) for grid in grids]
    return scores.index(max(scores))
