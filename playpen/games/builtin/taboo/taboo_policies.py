"""Programmatic taboo policies: what the describer says and what the guesser answers
(adversarial_taboo's policies are in adv_taboo_policies.py).

Both are pure functions of what the player knows, so that players stay deterministic
and the policies can be tested without running a game.
"""
from taboo_lexicon import Lexicon
from taboo_rules import CLUE_PREFIX, GUESS_PREFIX, forbidden_stems, normalize_guess, stem, stems_of, \
    taboo_violations, text_after_last, tokenize

FALLBACK_CLUE = "a thing most people know"


def compose_clue(target: str, related: list[str], clues: list[str], num_given: int) -> str:
    """The describer's next clue: the first rule-abiding sentence, starting at `num_given`.

    Sentences are tried in order, wrapping around, so each round adds a new one. If
    every sentence breaks the stem rule, the forbidden words are cut out of the next one.
    """
    if clues:
        start = num_given % len(clues)
        ordered = clues[start:] + clues[:start]
        for clue in ordered:
            if not taboo_violations(clue, target, related):
                return clue
        forbidden = forbidden_stems(target, related)
        kept = " ".join(word for word in tokenize(ordered[0]) if stem(word) not in forbidden)
        if kept and not taboo_violations(kept, target, related):
            return kept
    return FALLBACK_CLUE


def clue_text(message: str) -> str:
    """The clue inside a message: what follows its last "CLUE:" (the whole text if none)."""
    return text_after_last(message, CLUE_PREFIX)


def previous_guess(reply: str) -> str:
    """The normalized guess of one of the guesser's own earlier replies."""
    position = reply.find(GUESS_PREFIX)
    return normalize_guess(reply if position < 0 else reply[position + len(GUESS_PREFIX):])


def choose_guess(lexicon: Lexicon, clues: list[str], previous_guesses: list[str]) -> str:
    """The known word that best matches all clues so far and was not guessed yet."""
    stems = stems_of(clues)
    ranking = lexicon.rank(stems, exclude=previous_guesses)
    if not ranking:  # every known word was tried: repeat the best one
        ranking = lexicon.rank(stems)
    return ranking[0][0] if ranking else "thing"
