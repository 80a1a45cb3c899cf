"""Generate the imagegame instances (seeded, reproducible).

    python playpen/games/imagegame/instancegenerator.py

writes in/instances.json (evaluation: 30 compact pattern grids + 29 random grids)
and in/instances_train.json (training: 60 + 60 other grids). Compact grids are
geometric shapes (lines, frames, blocks, crosses, diagonals, triangles, stripes)
drawn with one letter, a third of them with a second shape in a second letter on
top; random grids scatter one letter over 3 to 20 random cells. Evaluation and
training never share a target grid, nor a compact grid's shape.
"""
from __future__ import annotations

import itertools
import os
import random

from clemcore.clemgame import GameInstanceGenerator

from imagegame_grids import EMPTY, LETTERS, SIZE, format_grid

SEED = 17
MAX_ROUNDS = 25
NUM_EVAL = {"compact": 30, "random": 29}
NUM_TRAIN = {"compact": 60, "random": 60}
RANDOM_FILLED_RANGE = (3, 20)
TWO_LETTER_SHARE = 1 / 3
GAME_DIR = os.path.dirname(os.path.abspath(__file__))

CELLS = [(r, c) for r in range(SIZE) for c in range(SIZE)]


def shape_pool() -> list[frozenset]:
    """Distinct compact shapes as sets of (row, column) cells, in a fixed order."""
    shapes = []
    for rows in range(1, 3):  # one or two full rows / columns
        for lines in itertools.combinations(range(SIZE), rows):
            shapes.append({(r, c) for r in lines for c in range(SIZE)})
            shapes.append({(r, c) for c in lines for r in range(SIZE)})
    for r, c in itertools.product(range(SIZE), repeat=2):  # crosses of one row and one column
        shapes.append({(r, j) for j in range(SIZE)} | {(i, c) for i in range(SIZE)})
    for top, bottom in itertools.combinations(range(SIZE), 2):  # blocks and frames
        for left, right in itertools.combinations(range(SIZE), 2):
            block = {(r, c) for r in range(top, bottom + 1) for c in range(left, right + 1)}
            shapes.append(block)
            if bottom - top >= 2 and right - left >= 2:
                shapes.append({(r, c) for r, c in block if r in (top, bottom) or c in (left, right)})
    diagonal = {(i, i) for i in range(SIZE)}
    anti = {(i, SIZE - 1 - i) for i in range(SIZE)}
    shapes += [diagonal, anti, diagonal | anti]
    shapes += [{(r, c) for r, c in CELLS if test(r, c)} for test in (
        lambda r, c: r >= c, lambda r, c: r <= c, lambda r, c: r + c <= SIZE - 1, lambda r, c: r + c >= SIZE - 1,
        lambda r, c: (r + c) % 2 == 0, lambda r, c: (r + c) % 2 == 1,
        lambda r, c: r % 2 == 0, lambda r, c: c % 2 == 0, lambda r, c: r % 2 == 1, lambda r, c: c % 2 == 1,
        lambda r, c: abs(r - 2) + abs(c - 2) <= 2, lambda r, c: abs(r - 2) + abs(c - 2) == 2,
    )]
    unique = []
    for shape in map(frozenset, shapes):
        if shape not in unique and 0 < len(shape) < SIZE * SIZE:
            unique.append(shape)
    return unique


def draw(layers: list[tuple[frozenset, str]]):
    """A grid with each (shape, letter) layer painted in order."""
    cells = {}
    for shape, letter in layers:
        cells.update({cell: letter for cell in shape})
    return tuple(tuple(cells.get((r, c), EMPTY) for c in range(SIZE)) for r in range(SIZE))


def compact_grids(seed: int) -> tuple[list, list]:
    """(evaluation grids, training grids); their primary shapes are disjoint."""
    rng = random.Random(f"{seed}-compact")
    shapes = shape_pool()
    rng.shuffle(shapes)
    primaries = {"eval": shapes[:NUM_EVAL["compact"]],
                 "train": shapes[NUM_EVAL["compact"]:NUM_EVAL["compact"] + NUM_TRAIN["compact"]]}
    grids = {}
    for split, chosen in primaries.items():
        grids[split] = []
        for shape in chosen:
            first, second = rng.sample(LETTERS, 2)
            layers = [(shape, first)]
            if rng.random() < TWO_LETTER_SHARE:
                overlay = rng.choice([s for s in shapes if s != shape and len(s) <= 9])
                layers.append((overlay, second))
            grids[split].append(draw(layers))
    return grids["eval"], grids["train"]


def random_grids(seed: int) -> tuple[list, list]:
    """(evaluation grids, training grids) of one letter on random cells, all distinct."""
    rng = random.Random(f"{seed}-random")
    grids = []
    while len(grids) < NUM_EVAL["random"] + NUM_TRAIN["random"]:
        letter = rng.choice(LETTERS)
        shape = frozenset(rng.sample(CELLS, rng.randint(*RANDOM_FILLED_RANGE)))
        grid = draw([(shape, letter)])
        if grid not in grids:
            grids.append(grid)
    return grids[:NUM_EVAL["random"]], grids[NUM_EVAL["random"]:]


class ImageGameInstanceGenerator(GameInstanceGenerator):

    def __init__(self, split: str):
        super().__init__(GAME_DIR)
        assert split in ("eval", "train"), split
        self.split = split

    def on_generate(self, seed: int, **kwargs):
        for name, make in (("compact_grids", compact_grids), ("random_grids", random_grids)):
            eval_grids, train_grids = make(seed)
            experiment = self.add_experiment(name)
            experiment["max_rounds"] = MAX_ROUNDS
            for game_id, grid in enumerate(eval_grids if self.split == "eval" else train_grids):
                instance = self.add_game_instance(experiment, game_id)
                instance["target_grid"] = format_grid(grid)
                instance["filled_cells"] = sum(cell != EMPTY for row in grid for cell in row)


if __name__ == "__main__":
    ImageGameInstanceGenerator("eval").generate("instances.json", seed=SEED)
    ImageGameInstanceGenerator("train").generate("instances_train.json", seed=SEED)
