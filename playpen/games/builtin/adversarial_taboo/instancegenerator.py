"""Writes adversarial_taboo's instance files from resources/words.json (seeded).

    python playpen/games/adversarial_taboo/instancegenerator.py

Same word bank, frequency bins, seed and shuffle as taboo's generator: per bin
(high / medium / low wordfreq Zipf frequency) the first 20 shuffled words are
evaluation targets (in/instances.json), the next 40 training targets
(in/instances_train.json). So no evaluation target of either game is a training
target of the other; the remaining words are distractors in the lexicon.
"""
import json
import os
import random

from clemcore.clemgame import GameInstanceGenerator
from wordfreq import zipf_frequency

from adv_taboo_rules import mentions, stem, stopwords, tokenize

SEED = 42
MAX_ROUNDS = 5
NUM_EVAL_PER_BIN = 20
NUM_TRAIN_PER_BIN = 40
# (experiment name, lowest Zipf frequency included, highest excluded)
FREQUENCY_BINS = [("high_en", 4.5, 99.0), ("medium_en", 3.5, 4.5), ("low_en", 0.0, 3.5)]
GAME_DIR = os.path.dirname(os.path.abspath(__file__))


def load_words() -> list[dict]:
    with open(os.path.join(GAME_DIR, "resources", "words.json"), encoding="utf-8") as f:
        return json.load(f)["words"]


def load_lexicon_words() -> set[str]:
    with open(os.path.join(GAME_DIR, "resources", "lexicon.json"), encoding="utf-8") as f:
        return set(json.load(f)["cues"])


def validate(entries: list[dict], lexicon_words: set[str]) -> None:
    """Fail loudly on word data that would make an instance unplayable or unfair."""
    stop = stopwords()
    seen_stems = {}
    for entry in entries:
        word, related, clues = entry["word"], entry["related"], entry["clues"]
        if tokenize(word) != [word] or word in stop:
            raise ValueError(f"target {word!r} must be one lowercase non-stopword")
        if stem(word) in seen_stems:
            raise ValueError(f"targets {word!r} and {seen_stems[stem(word)]!r} share a stem")
        seen_stems[stem(word)] = word
        if word not in lexicon_words:
            raise ValueError(f"target {word!r} is missing from the lexicon")
        for hint in [*related, *clues]:
            if mentions(hint, word):
                raise ValueError(f"hint of {word!r} says the target: {hint!r}")


def split_by_frequency(entries: list[dict], seed: int) -> dict[str, tuple[list[dict], list[dict]]]:
    """Per frequency bin: (evaluation entries, training entries), disjoint."""
    rng = random.Random(seed)
    splits = {}
    for name, low, high in FREQUENCY_BINS:
        in_bin = sorted((e for e in entries if low <= zipf_frequency(e["word"], "en") < high),
                        key=lambda e: e["word"])
        if len(in_bin) < NUM_EVAL_PER_BIN + NUM_TRAIN_PER_BIN:
            raise ValueError(f"bin {name} has only {len(in_bin)} words")
        rng.shuffle(in_bin)
        splits[name] = (in_bin[:NUM_EVAL_PER_BIN],
                        in_bin[NUM_EVAL_PER_BIN:NUM_EVAL_PER_BIN + NUM_TRAIN_PER_BIN])
    return splits


class AdversarialTabooInstanceGenerator(GameInstanceGenerator):

    def __init__(self):
        super().__init__(GAME_DIR)

    def on_generate(self, seed: int, split: str = "eval"):
        if split not in ("eval", "train"):
            raise ValueError(f"split must be 'eval' or 'train', not {split!r}")
        entries = load_words()
        validate(entries, load_lexicon_words())
        splits = split_by_frequency(entries, seed)
        for name, low, high in FREQUENCY_BINS:
            evaluation, training = splits[name]
            experiment = self.add_experiment(name)
            experiment["max_rounds"] = MAX_ROUNDS
            experiment["zipf_range"] = [low, high]
            for game_id, entry in enumerate(evaluation if split == "eval" else training):
                instance = self.add_game_instance(experiment, game_id)
                instance["target_word"] = entry["word"]
                instance["related_words"] = entry["related"]
                instance["clues"] = entry["clues"]
                instance["target_zipf"] = zipf_frequency(entry["word"], "en")


if __name__ == "__main__":
    AdversarialTabooInstanceGenerator().generate("instances.json", seed=SEED, split="eval")
    AdversarialTabooInstanceGenerator().generate("instances_train.json", seed=SEED, split="train")
