"""Generate the debate instances (seeded, reproducible).

    python playpen/games/builtin/debate/instancegenerator.py

Each instance is a question with one numeric answer, the calculation that solves it, and
a wrong answer that no calculation over the question's and the facts' numbers reaches
(so a true check can only support the correct side). The correct answer goes to
Debater A in even and to Debater B in odd game ids. One pool of distinct questions per
experiment is shuffled once: the first slice is the evaluation set, the next the
training set (never the same question).
"""
from __future__ import annotations

import os
import random

from clemcore.clemgame import GameInstanceGenerator

from debate_rules import evaluate, numbers_in, reachable_values

SEED = 42
ROUNDS = 2
NUM_EVAL, NUM_TRAIN = 12, 60  # per experiment
WRONG_OFFSETS = (1, 2, 9, 10, 11, 20, 60, 100)
GAME_DIR = os.path.dirname(os.path.abspath(__file__))
NO_FACTS = "No further facts are needed."


def product_plus(rng):
    a, b, c = rng.randint(12, 98), rng.randint(12, 98), rng.randint(2, 98)
    return f"What is {a} × {b} + {c}?", "× means multiplication.", f"{a} * {b} + {c}"


def packs(rng):
    size, num, given = rng.randint(6, 24), rng.randint(3, 19), rng.randint(2, 30)
    item = rng.choice(["pencils", "stickers", "marbles", "cards", "buttons"])
    name = rng.choice(["Ana", "Ben", "Chen", "Dara", "Emil", "Farah"])
    return (f"A pack holds {size} {item}. {name} buys {num} packs and then gives away {given} {item}. "
            f"How many {item} does {name} have left?", NO_FACTS, f"{size} * {num} - {given}")


def percent(rng):
    p = rng.choice([5, 15, 20, 25, 30, 35, 40, 45, 60, 65, 75, 80, 85, 95])
    n = 20 * rng.randint(3, 49)
    if p * n % 100:
        return None
    return (f"What is {p}% of {n}?", "A percentage counts hundredths: p% of a number is p / 100 times the number.",
            f"{p} / 100 * {n}")


def seconds(rng):
    h, m = rng.randint(1, 9), rng.randint(1, 59)
    return (f"How many seconds are there in {h} hours and {m} minutes?",
            "An hour has 60 minutes and a minute has 60 seconds.", f"({h} * 60 + {m}) * 60")


def metres(rng):
    k, m = rng.randint(2, 49), rng.randint(11, 999)
    return (f"How many metres are {k} kilometres and {m} metres?", "A kilometre has 1000 metres.",
            f"{k} * 1000 + {m}")


def days(rng):
    w, d = rng.randint(3, 52), rng.randint(1, 6)
    return f"How many days are there in {w} weeks and {d} days?", "A week has 7 days.", f"{w} * 7 + {d}"


EXPERIMENTS = {"arithmetic": (product_plus, packs), "percentages": (percent,),
               "unit_conversions": (seconds, metres, days)}


def wrong_answer(rng, question: str, facts: str, answer: float) -> float | None:
    """A plausible wrong answer (a slip of 1, 2, 9, 10, ... either way) that no calculation
    over the given numbers reaches."""
    allowed = list((numbers_in(question) + numbers_in(facts)).elements())
    reachable = reachable_values(allowed)
    offsets = list(WRONG_OFFSETS)
    rng.shuffle(offsets)
    for offset in offsets:
        candidate = answer + rng.choice((-1, 1)) * offset
        if candidate > 0 and round(candidate, 9) not in reachable:
            return candidate
    return None


def question_pool(seed: int, experiment: str, size: int) -> list[dict]:
    rng = random.Random(f"{seed}-{experiment}")
    kinds, seen, pool = EXPERIMENTS[experiment], set(), []
    while len(pool) < size:
        kind = kinds[len(pool) % len(kinds)]
        drawn = kind(rng)
        if drawn is None or drawn[0] in seen:
            continue
        question, facts, solution = drawn
        answer = round(evaluate(solution), 6)
        if not answer.is_integer():
            continue
        wrong = wrong_answer(rng, question, facts, answer)
        if wrong is None:
            continue
        seen.add(question)
        pool.append(dict(kind=kind.__name__, question=question, facts=facts, solution=solution,
                         answer=int(answer), wrong_answer=int(wrong)))
    rng.shuffle(pool)
    return pool


class DebateInstanceGenerator(GameInstanceGenerator):

    def __init__(self, split: str):
        super().__init__(GAME_DIR)
        assert split in ("eval", "train"), split
        self.split = split

    def on_generate(self, seed: int, **kwargs):
        for name in EXPERIMENTS:
            experiment = self.add_experiment(name)
            experiment["rounds"] = ROUNDS
            pool = question_pool(seed, name, NUM_EVAL + NUM_TRAIN)
            for game_id, entry in enumerate(pool[:NUM_EVAL] if self.split == "eval" else pool[NUM_EVAL:]):
                instance = self.add_game_instance(experiment, game_id)
                instance.update(entry)
                a_correct = game_id % 2 == 0
                instance["answer_a"] = entry["answer"] if a_correct else entry["wrong_answer"]
                instance["answer_b"] = entry["wrong_answer"] if a_correct else entry["answer"]


if __name__ == "__main__":
    DebateInstanceGenerator("eval").generate("instances.json", seed=SEED)
    DebateInstanceGenerator("train").generate("instances_train.json", seed=SEED)
