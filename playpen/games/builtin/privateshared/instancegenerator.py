"""Writes in/instances.json (evaluation: 10 per domain) and in/instances_train.json
(training: 20 per domain) for privateshared.

    python playpen/games/privateshared/instancegenerator.py

Seeded and reproducible. Per domain, one stream of distinct slot-value combinations is
drawn and split, so evaluation and training never share a combination. Within an
instance no slot value mentions another one (so an answer fills only the slot it names).

in/instances_protocol.json, the larger held-out set of the learning protocol
(benchmarks/protocol.py, issue 28): per domain the 10 evaluation instances (the same ids
and contents) and the next 10 combinations of the stream after the training ones.
"""
import os
import random
from string import Template

from clemcore.clemgame import GameInstanceGenerator

import privateshared_rules as rules

GAME_PATH = os.path.dirname(os.path.abspath(__file__))
SEED = 73
NUM_EVAL = 10
NUM_TRAIN = 20
NUM_PROTOCOL_EXTRA = 10
SPLITS = {"eval": ("instances.json", 0, NUM_EVAL),
          "train": ("instances_train.json", NUM_EVAL, NUM_EVAL + NUM_TRAIN),
          "protocol": ("instances_protocol.json", NUM_EVAL + NUM_TRAIN, NUM_EVAL + NUM_TRAIN + NUM_PROTOCOL_EXTRA)}


def draw_value(domain: dict, slot: str, rng: random.Random) -> str:
    pool = domain.get("value_pool")
    if pool is None:
        return rng.choice(domain["slots"][slot]["values"])
    if rng.random() < 0.5:  # letters and numbers equally often, whatever the pool sizes
        return rng.choice(pool["letters"])
    low, high = pool["number_range"]
    return str(rng.randint(low, high))


def is_unambiguous(values: dict) -> bool:
    """No value mentions another one, e.g. no 'tea' next to 'iced tea'."""
    items = list(values.values())
    return all(not rules.mentions(a, b) for i, a in enumerate(items) for j, b in enumerate(items) if i != j)


def draw_combinations(domain: dict, rng: random.Random, count: int) -> list[dict]:
    combinations, seen = [], set()
    while len(combinations) < count:
        values = {slot: draw_value(domain, slot, rng) for slot in domain["slots"]}
        key = tuple(values.values())
        if key in seen or not is_unambiguous(values):
            continue
        seen.add(key)
        combinations.append(values)
    return combinations


def render_prompt(template: str, domain: dict, values: dict) -> str:
    slot_lines = "\n".join(f"{slot}: {value}" for slot, value in values.items())
    return Template(template).substitute(intro=domain["intro"], slot_lines=slot_lines,
                                         questioner_name=domain["questioner_name"],
                                         questioner_tag=domain["questioner_tag"]).strip()


class PrivateSharedInstanceGenerator(GameInstanceGenerator):

    def __init__(self):
        super().__init__(GAME_PATH)

    def on_generate(self, seed: int, split: str = "eval"):
        domains = self.load_json("resources/domains")
        template = self.load_template("resources/initial_prompt")
        _, start, stop = SPLITS[split]
        for name, domain in domains.items():
            # drawn in one stream: more combinations leave the first ones (and the splits) as they were
            combinations = draw_combinations(domain, random.Random(f"{seed}-{name}"), stop)
            experiment = self.add_experiment(name)
            experiment["questioner_tag"] = domain["questioner_tag"]
            parts = [("eval", combinations[:NUM_EVAL])] if split == "protocol" else []
            parts.append((split, combinations[start:stop]))
            game_id = 0
            for part, chosen in parts:
                rng = random.Random(f"{seed}-{name}-{part}")
                for values in chosen:
                    self._add(experiment, game_id, domain, template, values, rng)
                    game_id += 1

    def _add(self, experiment: dict, game_id: int, domain: dict, template: str, values: dict,
             rng: random.Random) -> None:
        slots = list(domain["slots"])
        instance = self.add_game_instance(experiment, game_id)
        instance["slots"] = values
        instance["question_order"] = rng.sample(slots, len(slots))
        instance["requests"] = {s: rng.choice(domain["slots"][s]["requests"]) for s in slots}
        instance["probes"] = {s: rng.sample(domain["slots"][s]["probes"], len(domain["slots"][s]["probes"]))
                              for s in slots}
        instance["questioner_tag"] = domain["questioner_tag"]
        instance["initial_prompt"] = render_prompt(template, domain, values)


if __name__ == "__main__":
    for split, (filename, _, _) in SPLITS.items():
        PrivateSharedInstanceGenerator().generate(filename=filename, seed=SEED, split=split)
