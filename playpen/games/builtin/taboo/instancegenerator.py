"""Writes the instance files of taboo and adversarial_taboo from resources/words.json
(seeded, reproducible).

    python playpen/games/builtin/taboo/instancegenerator.py

Targets are binned by wordfreq Zipf frequency (high / medium / low); each bin is
shuffled with the seed, its first 20 words become evaluation targets and the next 40
training targets. Both games get the same targets (they differ in `max_rounds`), so no
evaluation target of either game is a training target of the other; the remaining words
stay in the lexicon as distractors. Each game's evaluation set is the instances file its
spec in clemgame.json names (taboo: in/instances.json, adversarial_taboo:
in/instances_adversarial.json), its training set that name + "_train".

taboo's larger held-out set for the learning protocol (benchmarks/protocol.py, issue 28),
in/instances_protocol.json: every evaluation target (the same ids) followed by every word
of its bin that is neither an evaluation nor a training target (120 in all), so that a
dev and a test split can both be drawn from targets no training run has seen.
in/instances_protocol_listener.json: the same instances (same ids), played by a held-out
listener: the programmatic guesser keeps half of each word's lexicon cues
(``guesser_cue_share``), so a describer that fitted its training listener is found out.
"""
import json
import os
import random

from clemcore.clemgame import GameInstanceGenerator
from wordfreq import zipf_frequency

from taboo_rules import mentions, stem, stopwords, taboo_violations, tokenize

SEED = 42
MAX_ROUNDS = {"taboo": 3, "adversarial_taboo": 5}  # per game name
SPLITS = ("eval", "train", "protocol", "protocol_listener")
HELD_OUT_LISTENER_CUES = 0.5  # the share of its lexicon cues the held-out listener keeps
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


def instances_files() -> dict[tuple[str, str], str]:
    """(game name, split) -> instances file stem: a spec's own "instances" (clemgame.json)
    for "eval", that name + "_train" for "train"."""
    with open(os.path.join(GAME_DIR, "clemgame.json"), encoding="utf-8") as f:
        specs = json.load(f)
    own = {spec["game_name"]: spec.get("instances", "instances") for spec in specs}
    files = {(game, split): own[game] if split == "eval" else f"{own[game]}_train"
             for game in MAX_ROUNDS for split in ("eval", "train")}
    files[("taboo", "protocol")] = f"{own['taboo']}_protocol"  # the protocol's held-out set: taboo's only
    files[("taboo", "protocol_listener")] = f"{own['taboo']}_protocol_listener"  # the same, a held-out listener
    return files


def validate(entries: list[dict], lexicon_words: set[str]) -> None:
    """Fail loudly on word data that would make an instance of either game unplayable or unfair."""
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
        if len(related) != 3 or any(r in stop or stem(r) == stem(word) for r in related):
            raise ValueError(f"{word!r} needs 3 related non-stopwords with other stems: {related}")
        for clue in clues:  # taboo: the Describer gives them as they are
            if taboo_violations(clue, word, related):
                raise ValueError(f"clue of {word!r} breaks the stem rule: {clue!r}")
        for hint in [*related, *clues]:  # adversarial_taboo: the Attacker's hints
            if mentions(hint, word):
                raise ValueError(f"hint of {word!r} says the target: {hint!r}")


def split_by_frequency(entries: list[dict], seed: int) -> dict[str, tuple[list[dict], list[dict], list[dict]]]:
    """Per frequency bin: (evaluation entries, training entries, the bin's other entries), disjoint."""
    rng = random.Random(seed)
    splits = {}
    for name, low, high in FREQUENCY_BINS:
        in_bin = sorted((e for e in entries if low <= zipf_frequency(e["word"], "en") < high),
                        key=lambda e: e["word"])
        if len(in_bin) < NUM_EVAL_PER_BIN + NUM_TRAIN_PER_BIN:
            raise ValueError(f"bin {name} has only {len(in_bin)} words")
        rng.shuffle(in_bin)
        splits[name] = (in_bin[:NUM_EVAL_PER_BIN],
                        in_bin[NUM_EVAL_PER_BIN:NUM_EVAL_PER_BIN + NUM_TRAIN_PER_BIN],
                        in_bin[NUM_EVAL_PER_BIN + NUM_TRAIN_PER_BIN:])
    return splits


class TabooInstanceGenerator(GameInstanceGenerator):
    """The instances of one game of this folder (`game`: "taboo" or "adversarial_taboo")."""

    def __init__(self, game: str = "taboo"):
        if game not in MAX_ROUNDS:
            raise ValueError(f"game must be one of {', '.join(MAX_ROUNDS)}, not {game!r}")
        super().__init__(GAME_DIR)
        self.game = game

    def on_generate(self, seed: int, split: str = "eval"):
        if split not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(SPLITS)}, not {split!r}")
        entries = load_words()
        validate(entries, load_lexicon_words())
        splits = split_by_frequency(entries, seed)
        for name, low, high in FREQUENCY_BINS:
            evaluation, training, rest = splits[name]
            chosen = {"eval": evaluation, "train": training, "protocol": evaluation + rest,
                      "protocol_listener": evaluation + rest}[split]
            experiment = self.add_experiment(name)
            experiment["max_rounds"] = MAX_ROUNDS[self.game]
            experiment["zipf_range"] = [low, high]
            if split == "protocol_listener":
                experiment["guesser_cue_share"] = HELD_OUT_LISTENER_CUES
            for game_id, entry in enumerate(chosen):
                instance = self.add_game_instance(experiment, game_id)
                instance["target_word"] = entry["word"]
                instance["related_words"] = entry["related"]
                instance["clues"] = entry["clues"]
                instance["target_zipf"] = zipf_frequency(entry["word"], "en")


if __name__ == "__main__":
    for (game, split), stem_name in instances_files().items():
        TabooInstanceGenerator(game).generate(f"{stem_name}.json", seed=SEED, split=split)
