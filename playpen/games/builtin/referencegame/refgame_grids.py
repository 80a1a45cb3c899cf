"""Binary 5x5 grids for the reference game: rendering, reading and distances.

A grid is a tuple of 5 rows, each a tuple of 5 bools (True = filled). Grids are
shown to players with "X" for filled and "▢" (U+25A2) for empty cells.
"""
from __future__ import annotations

SIZE = 5
FILLED = "X"
EMPTY = "▢"

Grid = tuple  # tuple[tuple[bool, ...], ...], SIZE x SIZE

# Hand-drawn 5x5 glyphs (own design): "#" = filled, "." = empty.
_LETTER_GLYPHS = {
    "A": ".###. #...# ##### #...# #...#",
    "B": "####. #...# ####. #...# ####.",
    "C": ".#### #.... #.... #.... .####",
    "D": "####. #...# #...# #...# ####.",
    "E": "##### #.... ####. #.... #####",
    "F": "##### #.... ####. #.... #....",
    "G": ".#### #.... #..## #...# .###.",
    "H": "#...# #...# ##### #...# #...#",
    "I": "##### ..#.. ..#.. ..#.. #####",
    "J": "##### ...#. ...#. #..#. .##..",
    "K": "#...# #..#. ###.. #..#. #...#",
    "L": "#.... #.... #.... #.... #####",
    "M": "#...# ##.## #.#.# #...# #...#",
    "N": "#...# ##..# #.#.# #..## #...#",
    "O": ".###. #...# #...# #...# .###.",
    "P": "####. #...# ####. #.... #....",
    "Q": ".###. #...# #.#.# #..#. .##.#",
    "R": "####. #...# ####. #..#. #...#",
    "S": ".#### #.... .###. ....# ####.",
    "T": "##### ..#.. ..#.. ..#.. ..#..",
    "U": "#...# #...# #...# #...# .###.",
    "V": "#...# #...# #...# .#.#. ..#..",
    "W": "#...# #...# #.#.# ##.## #...#",
    "X": "#...# .#.#. ..#.. .#.#. #...#",
    "Y": "#...# .#.#. ..#.. ..#.. ..#..",
    "Z": "##### ...#. ..#.. .#... #####",
}
_DIGIT_GLYPHS = {
    "0": ".###. #..## #.#.# ##..# .###.",
    "1": "..#.. .##.. ..#.. ..#.. .###.",
    "2": ".###. #...# ..##. .#... #####",
    "3": "####. ....# .###. ....# ####.",
    "4": "#..#. #..#. ##### ...#. ...#.",
    "5": "##### #.... ####. ....# ####.",
    "6": ".###. #.... ####. #...# .###.",
    "7": "##### ....# ...#. ..#.. ..#..",
    "8": ".###. #...# .###. #...# .###.",
    "9": ".###. #...# .#### ....# .###.",
}


def _from_glyph(glyph: str) -> Grid:
    return tuple(tuple(ch == "#" for ch in row) for row in glyph.split())


def letter_grids() -> dict[str, Grid]:
    """The 26 capital letters as grids, keyed by letter."""
    return {name: _from_glyph(glyph) for name, glyph in _LETTER_GLYPHS.items()}


def number_grids() -> dict[str, Grid]:
    """The 10 digits as grids, keyed by digit."""
    return {name: _from_glyph(glyph) for name, glyph in _DIGIT_GLYPHS.items()}


def row_line_grids() -> dict[str, Grid]:
    """Grids whose filled cells are 1 to 4 complete rows (30 grids), keyed like 'rows 1,3'."""
    return _line_grids(by_rows=True)


def column_line_grids() -> dict[str, Grid]:
    """Grids whose filled cells are 1 to 4 complete columns (30 grids)."""
    return _line_grids(by_rows=False)


def _line_grids(by_rows: bool) -> dict[str, Grid]:
    grids = {}
    for bits in range(1, 2 ** SIZE - 1):
        lines = [i for i in range(SIZE) if bits >> i & 1]
        cells = tuple(tuple((r if by_rows else c) in lines for c in range(SIZE)) for r in range(SIZE))
        name = ("rows " if by_rows else "columns ") + ",".join(str(i + 1) for i in lines)
        grids[name] = cells
    return grids


def from_cells(cells) -> Grid:
    """A grid with exactly the given (row, column) cells filled (0-based)."""
    cells = set(cells)
    return tuple(tuple((r, c) in cells for c in range(SIZE)) for r in range(SIZE))


def filled_cells(grid: Grid) -> frozenset:
    return frozenset((r, c) for r in range(SIZE) for c in range(SIZE) if grid[r][c])


def flip(grid: Grid, cells) -> Grid:
    """The grid with the given (row, column) cells toggled."""
    cells = set(cells)
    return tuple(tuple(grid[r][c] != ((r, c) in cells) for c in range(SIZE)) for r in range(SIZE))


def distance(a: Grid, b: Grid) -> int:
    """Edit (Hamming) distance: the number of cells in which two grids differ."""
    return sum(a[r][c] != b[r][c] for r in range(SIZE) for c in range(SIZE))


def format_grid(grid: Grid) -> str:
    return "\n".join(" ".join(FILLED if cell else EMPTY for cell in row) for row in grid)


# Cells a player might plausibly use for "filled" / "empty" when reading text back.
_FILLED_TOKENS = {"X", "x", "■", "█"}
_EMPTY_TOKENS = {EMPTY, "□", ".", "_", "O", "o", "0"}


def read_grid_after(text: str, label: str) -> Grid | None:
    """Read the grid printed on the lines following the first line that starts with
    `label` (case-insensitive). Returns None when there is no such well-formed grid."""
    lines = text.splitlines()
    label = label.lower()
    for i, line in enumerate(lines):
        if line.strip().lower().startswith(label):
            rows = [ln for ln in lines[i + 1:] if ln.strip()][:SIZE]
            return _read_rows(rows)
    return None


def _read_rows(rows: list[str]) -> Grid | None:
    if len(rows) != SIZE:
        return None
    grid = []
    for row in rows:
        tokens = row.split()
        if len(tokens) != SIZE:
            return None
        if not all(t in _FILLED_TOKENS or t in _EMPTY_TOKENS for t in tokens):
            return None
        grid.append(tuple(t in _FILLED_TOKENS for t in tokens))
    return tuple(grid)
