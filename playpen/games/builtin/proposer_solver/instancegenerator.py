"""Writes the instance files of arith_proposer and arith_solver (seeded, reproducible).

    python playpen/games/builtin/proposer_solver/instancegenerator.py

arith_proposer: experiments of number sets (the numbers a problem may use), a panel of
reference solvers and the most operators allowed; arith_solver: problems by number of
operators. Evaluation and training sets never share a number set (proposer) or a problem
(solver). Each spec's evaluation set is the instances file clemgame.json names, its
training set that name + "_train".

arith_solver's larger held-out set for the learning protocol (benchmarks/protocol.py,
issue 28), in/instances_solver_protocol.json: per experiment its 10 evaluation problems
(the same ids) and 15 more, drawn from a stream of their own after every evaluation and
training problem, none of which they repeat.
"""
import os
import random

from clemcore.clemgame import GameInstanceGenerator

from arith_rules import evaluate, parse_expression, render

SEED = 42
SPLITS = ("eval", "train", "protocol")
GAME_DIR = os.path.dirname(os.path.abspath(__file__))
# experiment name -> (how many numbers, lowest, highest, most operators, reference solver skills)
PROPOSER_EXPERIMENTS = {"four_numbers": (4, 1, 12, 3, [1, 2, 3, 4]),
                        "five_numbers": (5, 2, 20, 4, [1, 2, 3, 4, 5])}
NUM_PROPOSER = {"eval": 10, "train": 40}  # per experiment
SOLVER_OPERATORS = (1, 2, 3, 4)  # one experiment each
NUM_SOLVER = {"eval": 10, "train": 30, "protocol_extra": 15}
FILES = {"arith_proposer": "instances_proposer", "arith_solver": "instances_solver"}


def number_sets(rng: random.Random, count: int, low: int, high: int, total: int) -> list[list[int]]:
    """`total` distinct sets (as sorted tuples) of `count` distinct numbers, each shuffled."""
    seen, out = set(), []
    while len(out) < total:
        numbers = rng.sample(range(low, high + 1), count)
        key = tuple(sorted(numbers))
        if key not in seen:
            seen.add(key)
            out.append(numbers)
    return out


def random_problem(rng: random.Random, operators: int) -> str:
    """A problem of `operators` operators over numbers 1-20, a parenthesis pair half of the time."""
    numbers = [str(rng.randint(1, 20)) for _ in range(operators + 1)]
    ops = [rng.choice("+-*") for _ in range(operators)]
    parts = [numbers[0]]
    for op, number in zip(ops, numbers[1:]):
        parts += [op, number]
    if operators >= 2 and rng.random() < 0.5:
        start = 2 * rng.randint(0, operators - 1)  # an operand index, then the operator after it
        parts[start] = "(" + parts[start]
        parts[start + 2] = parts[start + 2] + ")"
    return render(parse_expression(" ".join(parts)))


class ProposerSolverInstanceGenerator(GameInstanceGenerator):
    """The instances of one game of this folder (`game`: arith_proposer or arith_solver)."""

    def __init__(self, game: str = "arith_proposer"):
        if game not in FILES:
            raise ValueError(f"game must be one of {', '.join(FILES)}, not {game!r}")
        super().__init__(GAME_DIR)
        self.game = game

    def on_generate(self, seed: int, split: str = "eval"):
        if split not in SPLITS or (split == "protocol" and self.game != "arith_solver"):
            raise ValueError(f"split must be 'eval' or 'train' (arith_solver: or 'protocol'), not {split!r}")
        rng = random.Random(seed)
        if self.game == "arith_proposer":
            for name, (count, low, high, max_operators, panel) in PROPOSER_EXPERIMENTS.items():
                sets = number_sets(rng, count, low, high, NUM_PROPOSER["eval"] + NUM_PROPOSER["train"])
                chosen = sets[:NUM_PROPOSER["eval"]] if split == "eval" else sets[NUM_PROPOSER["eval"]:]
                experiment = self.add_experiment(name)
                experiment["max_operators"] = max_operators
                experiment["panel_skills"] = panel
                for game_id, numbers in enumerate(chosen):
                    self.add_game_instance(experiment, game_id)["numbers"] = numbers
            return
        for operators in SOLVER_OPERATORS:
            seen, problems = set(), []
            while len(problems) < NUM_SOLVER["eval"] + NUM_SOLVER["train"]:
                problem = random_problem(rng, operators)
                if problem not in seen:
                    seen.add(problem)
                    problems.append(problem)
            chosen = problems[:NUM_SOLVER["eval"]] if split != "train" else problems[NUM_SOLVER["eval"]:]
            if split == "protocol":  # its own stream: the eval/train draws of later experiments stay put
                extra = random.Random(f"{seed}-protocol-{operators}")
                while len(chosen) < NUM_SOLVER["eval"] + NUM_SOLVER["protocol_extra"]:
                    problem = random_problem(extra, operators)
                    if problem not in seen:
                        seen.add(problem)
                        chosen.append(problem)
            experiment = self.add_experiment(f"ops_{operators}")
            experiment["num_operators"] = operators
            for game_id, problem in enumerate(chosen):
                instance = self.add_game_instance(experiment, game_id)
                instance["problem"] = problem
                instance["answer"] = evaluate(parse_expression(problem))


if __name__ == "__main__":
    for game, stem in FILES.items():
        ProposerSolverInstanceGenerator(game).generate(f"{stem}.json", seed=SEED, split="eval")
        ProposerSolverInstanceGenerator(game).generate(f"{stem}_train.json", seed=SEED, split="train")
    ProposerSolverInstanceGenerator("arith_solver").generate(f"{FILES['arith_solver']}_protocol.json", seed=SEED,
                                                             split="protocol")
