"""Generate the wordle word data and instances (shared by all three variants).

    python playpen/games/wordle/instancegenerator.py

Writes
- resources/allowed_words.txt: the allowed-guess list, the NUM_ALLOWED_WORDS most frequent
  five-letter a-z words of wordfreq's English 'large' list (plus every target; see
  looks_like_a_word), in
  frequency order (the programmatic solver uses the order as its prior);
- in/instances.json (evaluation: 10 high + 20 medium frequency targets) and
  in/instances_train.json (training: all remaining targets), disjoint, drawn with SEED.

Targets and their clues come from resources/target_words.json (clues written for
playpen); each target is binned by its wordfreq Zipf frequency.
"""
import json
import os
import random
import re
from collections import Counter

import wordfreq
from clemcore.clemgame import GameInstanceGenerator

GAME_DIR = os.path.dirname(os.path.abspath(__file__))
SEED = 42
NUM_ALLOWED_WORDS = 12000
# Zipf frequency bins (wordfreq 'large' English list): high >= 4.5, medium in [3.5, 4.5).
BINS = {"high_frequency": (4.5, 99.0), "medium_frequency": (3.5, 4.5)}
NUM_EVAL = {"high_frequency": 10, "medium_frequency": 20}


def zipf(word: str) -> float:
    return wordfreq.zipf_frequency(word, "en", wordlist="large")


def frequency_bin(word: str) -> str | None:
    for name, (low, high) in BINS.items():
        if low <= zipf(word) < high:
            return name
    return None


def looks_like_a_word(word: str) -> bool:
    """Five letters a-z with a vowel (or y) and no letter four times: drops 'https',
    'hmmmm', 'xxxxx' and the like, which wordfreq counts as words."""
    return (re.fullmatch(r"[a-z]{5}", word) is not None and bool(set(word) & set("aeiouy"))
            and max(Counter(word).values()) < 4)


def build_allowed_words(targets: list[str]) -> list[str]:
    words = []
    for word in wordfreq.iter_wordlist("en", wordlist="large"):
        if looks_like_a_word(word):
            words.append(word)
            if len(words) == NUM_ALLOWED_WORDS:
                break
    missing = [t for t in targets if t not in set(words)]
    return words + missing


def split_targets(entries: list[dict], seed: int) -> dict[str, dict[str, list[dict]]]:
    """{'eval'|'train': {bin: [entries]}} — eval takes NUM_EVAL per bin, train the rest."""
    rng = random.Random(seed)
    split = {"eval": {}, "train": {}}
    for bin_name in BINS:
        members = sorted((e for e in entries if frequency_bin(e["word"]) == bin_name),
                         key=lambda e: e["word"])
        rng.shuffle(members)
        n_eval = NUM_EVAL[bin_name]
        if len(members) < n_eval + 1:
            raise ValueError(f"resources/target_words.json has {len(members)} {bin_name} words, "
                             f"need more than {n_eval}")
        split["eval"][bin_name] = members[:n_eval]
        split["train"][bin_name] = members[n_eval:]
    return split


class WordleInstanceGenerator(GameInstanceGenerator):

    def __init__(self):
        super().__init__(GAME_DIR)

    def on_generate(self, seed: int, targets_by_bin: dict[str, list[dict]] = None, **kwargs):
        game_id = 0
        for bin_name, entries in targets_by_bin.items():
            experiment = self.add_experiment(f"{bin_name}_words")
            experiment["frequency_bin"] = bin_name
            for entry in entries:
                instance = self.add_game_instance(experiment, game_id)
                instance["target_word"] = entry["word"]
                instance["clue"] = entry["clue"]
                game_id += 1


def main():
    with open(os.path.join(GAME_DIR, "resources", "target_words.json"), encoding="utf-8") as f:
        entries = json.load(f)
    words = [e["word"] for e in entries]
    if len(set(words)) != len(words):
        raise ValueError("resources/target_words.json lists a word twice")
    unbinned = [w for w in words if frequency_bin(w) is None]
    if unbinned:
        raise ValueError(f"targets outside every frequency bin: {unbinned}")
    allowed = build_allowed_words(words)
    with open(os.path.join(GAME_DIR, "resources", "allowed_words.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(allowed) + "\n")
    split = split_targets(entries, SEED)
    WordleInstanceGenerator().generate("instances.json", seed=SEED, targets_by_bin=split["eval"])
    WordleInstanceGenerator().generate("instances_train.json", seed=SEED, targets_by_bin=split["train"])
    print(f"{len(allowed)} allowed words; eval "
          f"{ {k: len(v) for k, v in split['eval'].items()} }, train "
          f"{ {k: len(v) for k, v in split['train'].items()} }")


if __name__ == "__main__":
    main()
