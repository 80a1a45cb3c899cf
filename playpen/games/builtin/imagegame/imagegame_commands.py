"""The drawing-command language of the programmatic image-game players.

The giver plans one command per letter pattern shared by a set of rows ("Fill rows 1
and 3 with B", "Put B in rows 2 and 4, columns 1, 3 and 5"), or the same by columns,
whichever plan is shorter; the follower reads such commands - and common free-text variants like "Put an E in the
second row third column" or "Fill the last row with X" - and applies them.
"""
from __future__ import annotations

import re

from imagegame_grids import EMPTY, SIZE, Grid

# --- giving commands ----------------------------------------------------------------


def _join(numbers: list[int]) -> str:
    words = [str(n + 1) for n in numbers]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _line_plan(target: Grid, by_rows: bool) -> list[str]:
    """One command per (letter, cell pattern) shared by a set of rows (or columns)."""
    line, other = ("row", "column") if by_rows else ("column", "row")
    groups: dict[tuple, list[int]] = {}
    for i in range(SIZE):
        cells = [target[i][j] if by_rows else target[j][i] for j in range(SIZE)]
        for letter in sorted({cell for cell in cells if cell != EMPTY}):
            where = tuple(j for j, cell in enumerate(cells) if cell == letter)
            groups.setdefault((letter, where), []).append(i)
    commands = []
    for (letter, where), lines in groups.items():
        lines_text = f"{line}{'s' if len(lines) > 1 else ''} {_join(lines)}"
        if len(where) == SIZE:
            commands.append(f"Fill {lines_text} with {letter}")
        else:
            cells_text = f"{other}{'s' if len(where) > 1 else ''} {_join(list(where))}"
            commands.append(f"Put {letter} in {lines_text}, {cells_text}")
    return commands


def plan_commands(target: Grid) -> list[str]:
    """Commands that draw `target` on an empty grid (without the final DONE)."""
    by_rows, by_columns = _line_plan(target, True), _line_plan(target, False)
    return by_columns if len(by_columns) < len(by_rows) else by_rows


# --- reading commands ---------------------------------------------------------------

_INDEX_WORDS = {
    "1": 1, "2": 2, "3": 3, "4": 4, "5": 5,
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5,
    "1st": 1, "2nd": 2, "3rd": 3, "4th": 4, "5th": 5,
    "last": 5, "middle": 3, "center": 3, "centre": 3,
    "top": 1, "upper": 1, "topmost": 1, "bottom": 5, "lower": 5, "bottommost": 5,
    "left": 1, "leftmost": 1, "right": 5, "rightmost": 5,
}
_CARDINAL = r"(?:[1-5]|one|two|three|four|five)\b"
_ORDINAL = r"(?:first|second|third|fourth|fifth|1st|2nd|3rd|4th|5th|last|middle|center|centre)\b"
# An ordinal right before a line noun belongs to that noun: in "the second row third
# column" the "third" is the column. Cardinals after a noun belong to it ("row 2 column 3").
_LIST_NUM = rf"(?:{_CARDINAL}|{_ORDINAL}(?!\s+(?:rows?|col(?:umn)?s?)\b))"
_LIST = rf"{_LIST_NUM}(?:\s*(?:,\s*and|,|and|&)\s*{_LIST_NUM})*"
_LINE_LIST = {
    "row": re.compile(rf"\brows?\s+(?:number\s+)?({_LIST})"),
    "column": re.compile(rf"\bcol(?:umn)?s?\s+(?:number\s+)?({_LIST})"),
}
_LINE_BEFORE = {
    "row": re.compile(rf"\b({_ORDINAL}|top|upper|topmost|bottom|lower|bottommost)\s+rows?\b"),
    "column": re.compile(rf"\b({_ORDINAL}|left|leftmost|right|rightmost)\s+col(?:umn)?s?\b"),
}
_ALL_LINES = {
    "row": re.compile(r"\b(?:all|every|each)\s+(?:the\s+)?rows?\b"),
    "column": re.compile(r"\b(?:all|every|each)\s+(?:the\s+)?col(?:umn)?s?\b"),
}
_LINE_NOUN = {"row": re.compile(r"\brows?\b"), "column": re.compile(r"\bcol(?:umn)?s?\b")}
_CORNER = re.compile(r"\b(top|upper|bottom|lower)[\s-]+(left|right)\b")
_WHOLE_GRID = re.compile(r"\b(?:(?:whole|entire|full|complete)\s+grid|all\s+(?:the\s+)?cells|every\s+cell)\b")
_ERASE = re.compile(r"^\s*(?:clear|erase|remove|delete|empty|blank)\b")
# ASCII only: under re.I alone, [a-z] also matches "ſ" and the Kelvin sign "K".
_LETTER_PATTERNS = [
    re.compile(r"\bwith\s+(?:(?:the\s+letter|letter|an?)\s+)?['\"]?([a-z])['\"]?(?![a-z])", re.I | re.A),
    re.compile(r"\b(?:put|place|write|draw|add|insert|set|fill\s+in)\s+(?:(?:an?|the\s+letter|letter|the)\s+)?"
               r"['\"]?([a-z])['\"]?(?![a-z])", re.I | re.A),
]


def _lines(text: str, line: str) -> set[int] | None:
    """0-based indices of the rows (or columns) a command names; None when it names
    the line noun but no index can be read ("row 6")."""
    if _ALL_LINES[line].search(text):
        return set(range(SIZE))
    found = set()
    for m in _LINE_LIST[line].finditer(text):
        found |= {_INDEX_WORDS[w] - 1 for w in re.findall(rf"{_CARDINAL}|{_ORDINAL}", m.group(1))}
    for m in _LINE_BEFORE[line].finditer(text):
        found.add(_INDEX_WORDS[m.group(1)] - 1)
    if not found and _LINE_NOUN[line].search(text):
        return None
    return found


def read_command(command: str) -> tuple[str, set] | None:
    """(letter or EMPTY, cells to set) for a command, or None when it cannot be read."""
    text = " ".join(command.lower().split())
    if _ERASE.search(text):
        letter = EMPTY
    else:
        letter = None
        for pattern in _LETTER_PATTERNS:
            m = pattern.search(command)
            if m:
                letter = m.group(1).upper()
                break
        if letter is None:
            return None
    cells = set()
    if _WHOLE_GRID.search(text):
        cells = {(r, c) for r in range(SIZE) for c in range(SIZE)}
    for m in _CORNER.finditer(text):
        cells.add((0 if m.group(1) in ("top", "upper") else SIZE - 1, 0 if m.group(2) == "left" else SIZE - 1))
    text = _CORNER.sub(" ", text)
    rows, columns = _lines(text, "row"), _lines(text, "column")
    if rows is None or columns is None:
        return None
    if rows and columns:
        cells |= {(r, c) for r in rows for c in columns}
    elif rows:
        cells |= {(r, c) for r in rows for c in range(SIZE)}
    elif columns:
        cells |= {(r, c) for r in range(SIZE) for c in columns}
    return (letter, cells) if cells else None


def apply_command(grid: Grid, command: str) -> Grid:
    """The grid after the command; unchanged when the command cannot be read."""
    action = read_command(command)
    if action is None:
        return grid
    letter, cells = action
    return tuple(tuple(letter if (r, c) in cells else grid[r][c] for c in range(SIZE)) for r in range(SIZE))
