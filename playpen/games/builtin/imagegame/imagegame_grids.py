"""5x5 letter grids for the image game: rendering, strict reading of the follower's
reply, and the precision / recall / F1 comparison with the target.

A grid is a tuple of 5 rows, each a tuple of 5 one-character strings: a capital
letter A-Z or EMPTY ("▢", U+25A2).
"""
from __future__ import annotations

import math
import string

from clemcore.clemgame.errors import ParseError

SIZE = 5
EMPTY = "▢"
LETTERS = string.ascii_uppercase

Grid = tuple  # tuple[tuple[str, ...], ...], SIZE x SIZE

EMPTY_GRID: Grid = tuple(tuple(EMPTY for _ in range(SIZE)) for _ in range(SIZE))


def format_grid(grid: Grid) -> str:
    return "\n".join(" ".join(row) for row in grid)


def parse_grid(response) -> Grid:
    """Read a follower reply: exactly 5 lines of 5 whitespace-separated cells, each a
    letter (either case; stored upper-case) or "▢"; blank lines around the grid and
    trailing spaces are ignored. Raises ParseError for anything else."""
    if not isinstance(response, str):
        raise ParseError(f"response is not text but {type(response).__name__}", str(response), key="type")
    lines = response.strip().splitlines()
    if len(lines) != SIZE:
        raise ParseError(f"the grid must have {SIZE} lines, not {len(lines)}", response, key="rows")
    grid = []
    for number, line in enumerate(lines, start=1):
        cells = line.split()
        if len(cells) != SIZE:
            raise ParseError(f"line {number} must have {SIZE} cells, not {len(cells)}", response, key="columns")
        for cell in cells:
            if not (cell == EMPTY or (len(cell) == 1 and cell.isascii() and cell.isalpha())):
                raise ParseError(f"line {number} has an invalid cell {cell[:20]!r}", response, key="cell")
        grid.append(tuple(cell.upper() for cell in cells))
    return tuple(grid)


def read_grid(text: str) -> Grid:
    """Strict parse of a grid string from an instance file (raises ValueError)."""
    try:
        return parse_grid(text)
    except ParseError as error:
        raise ValueError(error.reason) from error


def filled(grid: Grid) -> dict:
    """{(row, column): upper-case letter} for every filled cell (0-based)."""
    return {(r, c): cell.upper() for r, row in enumerate(grid) for c, cell in enumerate(row) if cell != EMPTY}


def grid_scores(drawn: Grid, target: Grid) -> tuple[float, float, float]:
    """(precision, recall, F1) in percent of the drawn grid's filled cells against the
    target's, matching letters case-insensitively. Two empty grids match perfectly."""
    drawn_cells, target_cells = filled(drawn), filled(target)
    if not drawn_cells and not target_cells:
        return 100.0, 100.0, 100.0
    correct = sum(1 for cell, letter in drawn_cells.items() if target_cells.get(cell) == letter)
    precision = 100.0 * correct / len(drawn_cells) if drawn_cells else 0.0
    recall = 100.0 * correct / len(target_cells) if target_cells else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return precision, recall, f1


def main_score(f1: float) -> int:
    """F1 in percent rounded half up to an integer."""
    return int(math.floor(f1 + 0.5))


def changed_cells(before: Grid, after: Grid) -> int:
    return sum(before[r][c] != after[r][c] for r in range(SIZE) for c in range(SIZE))
