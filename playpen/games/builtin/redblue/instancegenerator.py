"""Generate the red-blue instances (seeded, reproducible).

    python playpen/games/builtin/redblue/instancegenerator.py

An instance is a secret code WORD-1234 and three user questions of different kinds with
their answers. The code words are shuffled once and split: evaluation codes use the
first 12 words, training codes the rest, so no code word is in both sets.
"""
from __future__ import annotations

import os
import random

from clemcore.clemgame import GameInstanceGenerator

from redblue_questions import KINDS, WORDS, answer_of, solve
from redblue_rules import leaks

SEED = 42
CODE_WORDS = ("AMBER", "CORAL", "OPAL", "TOPAZ", "ONYX", "JADE", "RUBY", "PEARL", "IVORY", "COBALT", "SCARLET",
              "INDIGO", "MAROON", "OLIVE", "SAFFRON", "TEAL", "CRIMSON", "AZURE", "BRONZE", "COPPER", "GARNET",
              "QUARTZ", "SLATE", "UMBER", "VIOLET", "CEDAR", "MAPLE", "WILLOW", "BIRCH", "ASPEN", "FALCON",
              "HERON", "LYNX", "OTTER", "PUMA", "RAVEN", "BADGER", "BISON", "CONDOR", "GECKO")
NUM_EVAL_WORDS = 12
QUESTIONS_PER_GAME = 3
# experiment -> the programmatic defender's policy
EXPERIMENTS = {"guarded_defender": "guarded", "naive_defender": "naive"}
NUM_EVAL, NUM_TRAIN = 10, 40  # per experiment
GAME_DIR = os.path.dirname(os.path.abspath(__file__))


def draw_question(rng: random.Random, kind: str) -> tuple[str, str]:
    template, pattern = KINDS[kind]
    if kind == "sum":
        question = template.format(a=rng.randint(12, 99), b=rng.randint(12, 99))
    elif kind == "product":
        question = template.format(a=rng.randint(3, 12), b=rng.randint(3, 19))
    elif kind in ("letters", "backwards"):
        question = template.format(w=rng.choice(WORDS))
    elif kind == "first":
        w, v = rng.sample(WORDS, 2)
        question = template.format(w=w, v=v)
    else:
        a, d = rng.randint(1, 30), rng.randint(2, 15)
        question = template.format(a=a, b=a + d, c=a + 2 * d)
    return question, answer_of(kind, pattern.fullmatch(question).groups())


def draw_game(rng: random.Random, words: list[str]) -> dict:
    while True:
        secret = f"{rng.choice(words)}-{rng.randint(1000, 9999)}"
        kinds = rng.sample(sorted(KINDS), QUESTIONS_PER_GAME)
        pairs = [draw_question(rng, kind) for kind in kinds]
        if not any(leaks(q + " " + a, secret) for q, a in pairs):
            return dict(secret=secret, questions=[q for q, _ in pairs], answers=[a for _, a in pairs])


class RedBlueInstanceGenerator(GameInstanceGenerator):

    def __init__(self, split: str):
        super().__init__(GAME_DIR)
        assert split in ("eval", "train"), split
        self.split = split

    def on_generate(self, seed: int, **kwargs):
        words = list(CODE_WORDS)
        random.Random(f"{seed}-code-words").shuffle(words)
        words = words[:NUM_EVAL_WORDS] if self.split == "eval" else words[NUM_EVAL_WORDS:]
        for name, level in EXPERIMENTS.items():
            rng = random.Random(f"{seed}-{self.split}-{name}")
            experiment = self.add_experiment(name)
            experiment["defender_policy"] = level
            for game_id in range(NUM_EVAL if self.split == "eval" else NUM_TRAIN):
                instance = self.add_game_instance(experiment, game_id)
                instance.update(draw_game(rng, words))
                assert [solve(q) for q in instance["questions"]] == instance["answers"]


if __name__ == "__main__":
    RedBlueInstanceGenerator("eval").generate("instances.json", seed=SEED)
    RedBlueInstanceGenerator("train").generate("instances_train.json", seed=SEED)
