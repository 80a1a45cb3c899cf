"""The programmatic players' world knowledge: a closed description lexicon, shared by
taboo's Guesser and by both players of adversarial_taboo (as common knowledge).

resources/lexicon.json maps each known word (every target plus distractors) to cue words
that describe it. The stems a player heard (clues, attacks) are matched against the cue
stems of every word; rarer shared stems weigh more (inverse document frequency). The
lexicon never says which word is the target of an episode.

A *thinned* lexicon (:func:`default_lexicon` with ``cue_share`` below 1; taboo's experiment key
``guesser_cue_share``) keeps that share of each word's cues, a fixed draw per word: a listener
that knows less than the one a describer trained with (the learning protocol's held-out listener).
"""
import functools
import json
import math
import random
from collections import Counter
from pathlib import Path
from typing import Iterable

from taboo_rules import stem, stopwords, tokenize

LEXICON_FILE = Path(__file__).resolve().parent / "resources" / "lexicon.json"


class Lexicon:
    """Ranks known words by how well their cues match a set of heard stems."""

    def __init__(self, cues_by_word: dict[str, list[str]]):
        if not cues_by_word:
            raise ValueError("a lexicon needs at least one word")
        stop = stopwords()
        self.words = sorted(cues_by_word)
        self.word_stems = {word: stem(word) for word in self.words}
        self.cue_stems = {
            word: frozenset(stem(token) for cue in cues for token in tokenize(cue) if token not in stop)
            - {self.word_stems[word]}
            for word, cues in cues_by_word.items()}
        document_frequency = Counter(s for stems in self.cue_stems.values() for s in stems)
        num_words = len(self.words)
        self.idf = {s: math.log((1 + num_words) / count) for s, count in document_frequency.items()}

    def __deepcopy__(self, memo):
        # read-only after construction: forked envs (deep copies of a game) can share it
        return self

    @classmethod
    def from_file(cls, path: str | Path = LEXICON_FILE, cue_share: float = 1.0) -> "Lexicon":
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return cls(thinned(data["cues"], cue_share))

    def score(self, word: str, heard_stems: frozenset) -> float:
        return sum(self.idf[s] for s in self.cue_stems[word] & heard_stems)

    def rank(self, heard_stems: Iterable[str], exclude: Iterable[str] = ()) -> list[tuple[str, float]]:
        """Known words ordered by descending score (ties alphabetically).

        Words in `exclude` and words whose own stem occurs among the heard stems (neither
        taboo's Describer nor adversarial_taboo's Attacker may say the target) are left out.
        """
        stems = frozenset(heard_stems)
        excluded = set(exclude)
        candidates = [word for word in self.words
                      if word not in excluded and self.word_stems[word] not in stems]
        scored = [(word, self.score(word, stems)) for word in candidates]
        return sorted(scored, key=lambda item: (-item[1], item[0]))


def thinned(cues_by_word: dict[str, list[str]], share: float) -> dict[str, list[str]]:
    """Each word keeps ``share`` of its cues (at least one), the same ones in every process:
    drawn with a generator seeded by the word."""
    if not 0.0 < share <= 1.0:
        raise ValueError(f"a cue share must be in (0, 1], got {share}")
    if share == 1.0:
        return cues_by_word
    out = {}
    for word, cues in cues_by_word.items():
        keep = max(1, round(share * len(cues)))
        chosen = sorted(random.Random(f"taboo-lexicon:{word}").sample(range(len(cues)), keep))
        out[word] = [cues[i] for i in chosen]
    return out


@functools.lru_cache(maxsize=4)
def default_lexicon(cue_share: float = 1.0) -> Lexicon:
    """The shipped lexicon (thinned to ``cue_share`` of each word's cues), loaded once per
    process and share (players only read it)."""
    return Lexicon.from_file(LEXICON_FILE, cue_share)
