"""Generate the referencegame instances (seeded, reproducible).

    python playpen/games/referencegame/instancegenerator.py

writes in/instances.json (evaluation: 5 categories x 6 targets x 3 target positions
= 90) and in/instances_train.json (training: every other target of each category
x 3 positions). The two files never share a target grid.
"""
from __future__ import annotations

import os
import random

from clemcore.clemgame import GameInstanceGenerator

from refgame_grids import (SIZE, column_line_grids, distance, flip, format_grid, from_cells,
                           letter_grids, number_grids, row_line_grids)

SEED = 42
EVAL_TARGETS_PER_CATEGORY = 6
NUM_RANDOM_TARGETS = 30  # 6 for evaluation, 24 for training
RANDOM_FILLED_RANGE = (6, 15)  # filled cells of a random target
RANDOM_FLIPS_RANGE = (2, 4)  # cells toggled to derive a random target's distractors
CATEGORIES = ("letter", "number", "row_line", "column_line", "random")
GAME_DIR = os.path.dirname(os.path.abspath(__file__))


def category_pools(seed: int) -> dict[str, dict]:
    """Named grids of every category; for "random", freshly drawn random grids."""
    rng = random.Random(f"{seed}-random-pool")
    cells = [(r, c) for r in range(SIZE) for c in range(SIZE)]
    randoms = {}
    while len(randoms) < NUM_RANDOM_TARGETS:
        grid = from_cells(rng.sample(cells, rng.randint(*RANDOM_FILLED_RANGE)))
        if grid not in randoms.values():
            randoms[f"random_{len(randoms):02d}"] = grid
    return {"letter": letter_grids(), "number": number_grids(), "row_line": row_line_grids(),
            "column_line": column_line_grids(), "random": randoms}


def split_targets(seed: int) -> dict[str, tuple[list[str], list[str]]]:
    """Per category: (evaluation target names, training target names), disjoint."""
    rng = random.Random(f"{seed}-split")
    splits = {}
    for category, pool in category_pools(seed).items():
        names = sorted(pool)
        rng.shuffle(names)
        splits[category] = (sorted(names[:EVAL_TARGETS_PER_CATEGORY]),
                            sorted(names[EVAL_TARGETS_PER_CATEGORY:]))
    return splits


def pick_distractors(category: str, name: str, pool: dict, seed: int) -> list:
    """The two grids nearest to the target by edit distance (seeded tie-breaking).
    Random targets get distractors made by toggling a few of their cells, which are
    nearer than any other random grid would be."""
    rng = random.Random(f"{seed}-{category}-{name}")
    target = pool[name]
    if category == "random":
        cells = [(r, c) for r in range(SIZE) for c in range(SIZE)]
        distractors = []
        while len(distractors) < 2:
            candidate = flip(target, rng.sample(cells, rng.randint(*RANDOM_FLIPS_RANGE)))
            if candidate not in distractors:
                distractors.append(candidate)
        return distractors
    others = [other for other in sorted(pool) if pool[other] != target]
    ranked = sorted(others, key=lambda other: (distance(target, pool[other]), rng.random()))
    return [pool[other] for other in ranked[:2]]


class ReferenceGameInstanceGenerator(GameInstanceGenerator):

    def __init__(self, split: str):
        super().__init__(GAME_DIR)
        assert split in ("eval", "train"), split
        self.split = split

    def on_generate(self, seed: int, **kwargs):
        pools = category_pools(seed)
        splits = split_targets(seed)
        for category in CATEGORIES:
            experiment = self.add_experiment(f"{category}_grids")
            experiment["category"] = category
            eval_names, train_names = splits[category]
            names = eval_names if self.split == "eval" else train_names
            game_id = 0
            for name in names:
                target = pools[category][name]
                distractors = pick_distractors(category, name, pools[category], seed)
                for position in (1, 2, 3):
                    follower_grids = list(distractors)
                    follower_grids.insert(position - 1, target)
                    instance = self.add_game_instance(experiment, game_id)
                    instance["target_name"] = name
                    instance["target_grid"] = format_grid(target)
                    instance["distractor_grids"] = [format_grid(d) for d in distractors]
                    instance["follower_grids"] = [format_grid(g) for g in follower_grids]
                    instance["target_position"] = position
                    game_id += 1


if __name__ == "__main__":
    ReferenceGameInstanceGenerator("eval").generate("instances.json", seed=SEED)
    ReferenceGameInstanceGenerator("train").generate("instances_train.json", seed=SEED)
