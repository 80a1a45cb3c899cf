"""Generate the refine instances (seeded, reproducible).

    python playpen/games/builtin/refine/instancegenerator.py

A task is a topic with a word it brings to mind (the `association`, which the task then
forbids), two required words, a first word, a final mark and a length range. Topics are
shuffled once and split: evaluation tasks use the first 8 topics, training tasks the
other 16, so no topic is in both sets.
"""
from __future__ import annotations

import os
import random

from clemcore.clemgame import GameInstanceGenerator

SEED = 42
TOPICS = (("the ocean", "water"), ("a library", "books"), ("winter", "snow"), ("a city at night", "lights"),
          ("a bakery", "bread"), ("the moon", "sky"), ("a football match", "goals"), ("a garden", "flowers"),
          ("a thunderstorm", "rain"), ("a birthday party", "cake"), ("a long train ride", "tracks"),
          ("a mountain hike", "rocks"), ("an old castle", "walls"), ("a forest in autumn", "leaves"),
          ("a busy airport", "planes"), ("a school morning", "teachers"), ("a farm", "animals"),
          ("a beach holiday", "sand"), ("a concert", "music"), ("a kitchen", "food"), ("a desert", "heat"),
          ("a rainy afternoon", "clouds"), ("a museum", "paintings"), ("a river", "fish"))
REQUIRED = ("quiet", "golden", "journey", "remember", "bright", "together", "slowly", "tiny", "ancient", "promise",
            "gentle", "hidden", "morning", "laughter", "silver", "wander", "careful", "distant", "warm", "secret")
STARTS = ("Today", "Sometimes", "Imagine", "Every", "Perhaps", "Yesterday", "Tonight", "Somewhere")
ENDS = (".", "!", "?")
LENGTHS = ((8, 12), (12, 18), (15, 25), (20, 30))
NUM_EVAL_TOPICS = 8
EXPERIMENTS = {"one_revision": 1, "two_revisions": 2}
NUM_EVAL, NUM_TRAIN = 12, 48  # per experiment
GAME_DIR = os.path.dirname(os.path.abspath(__file__))


def draw_task(rng: random.Random, topics) -> dict:
    topic, association = rng.choice(topics)
    low, high = rng.choice(LENGTHS)
    return dict(topic=topic, association=association, constraints=dict(
        min_words=low, max_words=high, include=sorted(rng.sample(REQUIRED, 2)), exclude=[association],
        start=rng.choice(STARTS), end=rng.choice(ENDS)))


class RefineInstanceGenerator(GameInstanceGenerator):

    def __init__(self, split: str):
        super().__init__(GAME_DIR)
        assert split in ("eval", "train"), split
        self.split = split

    def on_generate(self, seed: int, **kwargs):
        topics = list(TOPICS)
        random.Random(f"{seed}-topics").shuffle(topics)
        topics = topics[:NUM_EVAL_TOPICS] if self.split == "eval" else topics[NUM_EVAL_TOPICS:]
        for name, revisions in EXPERIMENTS.items():
            rng = random.Random(f"{seed}-{self.split}-{name}")
            experiment = self.add_experiment(name)
            experiment["revisions"] = revisions
            for game_id in range(NUM_EVAL if self.split == "eval" else NUM_TRAIN):
                instance = self.add_game_instance(experiment, game_id)
                instance.update(draw_task(rng, topics))


if __name__ == "__main__":
    RefineInstanceGenerator("eval").generate("instances.json", seed=SEED)
    RefineInstanceGenerator("train").generate("instances_train.json", seed=SEED)
