"""Generate the negotiation instances (seeded, reproducible).

    python playpen/games/builtin/negotiation/instancegenerator.py

One pool of distinct games (items, counts, both sides' values) is drawn per experiment
and shuffled once; the first slice becomes the evaluation set (in/instances.json), the
next the training set (in/instances_train.json), so the two never share a game.
"""
from __future__ import annotations

import os
import random

from clemcore.clemgame import GameInstanceGenerator

from negotiation_rules import best_joint

SEED = 42
ITEM_NAMES = ("book", "hat", "ball", "pen", "cup", "lamp", "map", "coin", "key", "shell")
TOTAL_POINTS = 10  # what the whole pool is worth to each side
# experiment name -> (number of item kinds, max_turns)
EXPERIMENTS = {"three_items": (3, 8), "four_items": (4, 10)}
NUM_EVAL, NUM_TRAIN = 20, 100  # per experiment
GAME_DIR = os.path.dirname(os.path.abspath(__file__))


def draw_values(rng: random.Random, counts: list[int]) -> list[int] | None:
    """Non-negative integer values with sum(count * value) == TOTAL_POINTS, or None."""
    values = [0] * len(counts)
    left = TOTAL_POINTS
    for i in rng.sample(range(len(counts)), len(counts))[:-1]:
        values[i] = rng.randint(0, left // counts[i])
        left -= values[i] * counts[i]
    remaining = [i for i in range(len(counts)) if values[i] == 0]
    for i in remaining:
        if left % counts[i] == 0:
            values[i] = left // counts[i]
            return values
    return None


def draw_game(rng: random.Random, num_items: int) -> dict | None:
    """A game with conflict: both sides value some item, each side values at least two
    kinds, every kind is worth something to somebody, and the sides' values differ."""
    items = sorted(rng.sample(ITEM_NAMES, num_items), key=ITEM_NAMES.index)
    counts = [rng.randint(1, 4) for _ in items]
    values_a, values_b = draw_values(rng, counts), draw_values(rng, counts)
    if values_a is None or values_b is None or values_a == values_b:
        return None
    if sum(v > 0 for v in values_a) < 2 or sum(v > 0 for v in values_b) < 2:
        return None
    if any(a == 0 and b == 0 for a, b in zip(values_a, values_b)):
        return None
    if not any(a > 0 and b > 0 for a, b in zip(values_a, values_b)):
        return None
    return dict(items=items, counts=counts, values_a=values_a, values_b=values_b)


def game_pool(seed: int, experiment: str, size: int) -> list[dict]:
    num_items, _ = EXPERIMENTS[experiment]
    rng = random.Random(f"{seed}-{experiment}")
    seen, pool = set(), []
    while len(pool) < size:
        game = draw_game(rng, num_items)
        if game is None:
            continue
        key = repr(sorted(game.items()))
        if key not in seen:
            seen.add(key)
            pool.append(game)
    rng.shuffle(pool)
    return pool


class NegotiationInstanceGenerator(GameInstanceGenerator):

    def __init__(self, split: str):
        super().__init__(GAME_DIR)
        assert split in ("eval", "train"), split
        self.split = split

    def on_generate(self, seed: int, **kwargs):
        for name, (num_items, max_turns) in EXPERIMENTS.items():
            experiment = self.add_experiment(name)
            experiment["max_turns"] = max_turns
            pool = game_pool(seed, name, NUM_EVAL + NUM_TRAIN)
            games = pool[:NUM_EVAL] if self.split == "eval" else pool[NUM_EVAL:]
            for game_id, game in enumerate(games):
                instance = self.add_game_instance(experiment, game_id)
                instance.update(game)
                instance["best_joint_points"] = best_joint(game["counts"], game["values_a"], game["values_b"])


if __name__ == "__main__":
    NegotiationInstanceGenerator("eval").generate("instances.json", seed=SEED)
    NegotiationInstanceGenerator("train").generate("instances_train.json", seed=SEED)
