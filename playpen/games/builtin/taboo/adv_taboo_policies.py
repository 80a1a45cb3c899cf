"""Programmatic adversarial_taboo policies (taboo's are in taboo_policies.py). Both
players share the lexicon as common knowledge; everything is a pure function of what the
player has seen, so play is deterministic.

Defender: ranks known words by how well they match everything the Attacker said. It
declares the best one when that one clearly leads (by a smaller margin in the last
round, where a tie is the alternative); otherwise it engages by naming an association
that is NOT among its top suspects, which is how it can still be lured into saying
the target.

Attacker: offers hints (a related word, or one of its clue sentences as a riddle) and
picks the one that leaves the target as plausible as possible without making it the
Defender's obvious answer: the target should end up just behind the Defender's
suspects, where it is mentioned as a side association.
"""
from taboo_lexicon import Lexicon
from taboo_rules import ATTACK_PREFIX, DEFEND_PREFIX, mentions, stems_of, text_after_last

NUM_SUSPECTS = 3  # the Defender never says its three best candidates
AIM_RANK = NUM_SUSPECTS + 1  # where the Attacker wants the target in the Defender's ranking
DECLARE_MIN_SCORE = 6.0  # evidence needed before any declaration (about two rare shared stems)
DECLARE_RATIO = 2.0  # lead over the runner-up needed to declare before the last round
FINAL_DECLARE_RATIO = 1.25  # lead needed in the last round (declaring beats a likely draw)

RELATED_HINT = "Let's chat about {}. Anything that occurs to you?"
RIDDLE_HINT = "A little riddle for you: {} Any idea?"
FILLER_HINT = "Tell me about an ordinary day of yours."
DEFENDER_ASSOCIATION = "Hmm, that makes me think of {}."
DEFENDER_STALL = "I am not sure where you are going with this. Tell me more."


def target_rank(lexicon: Lexicon, stems: frozenset, target: str) -> float:
    """1-based position of the target in the Defender's ranking; infinite when the
    target has no evidence at all."""
    for position, (word, score) in enumerate(lexicon.rank(stems), start=1):
        if word == target:
            return position if score > 0 else float("inf")
    return float("inf")


def attacker_hint(lexicon: Lexicon, target: str, related: list[str], clues: list[str],
                  said: list[str]) -> str:
    """The Attacker's next message body, given its earlier message bodies `said`."""
    hints = [RELATED_HINT.format(word) for word in related] + [RIDDLE_HINT.format(clue) for clue in clues]
    fresh = [hint for hint in hints if hint not in said and not mentions(hint, target)]
    if not fresh:
        return FILLER_HINT
    before = stems_of(said)

    def distance_to_aim(indexed_hint):
        index, hint = indexed_hint
        rank = target_rank(lexicon, before | stems_of([hint]), target)
        return abs(rank - AIM_RANK), index

    return min(enumerate(fresh), key=distance_to_aim)[1]


def defender_reply(lexicon: Lexicon, heard: list[str], round_number: int, max_rounds: int) -> str:
    """The Defender's next message body, given every Attacker message body so far."""
    positive = [(word, score) for word, score in lexicon.rank(stems_of(heard)) if score > 0]
    if positive:
        best, best_score = positive[0]
        runner_up = positive[1][1] if len(positive) > 1 else 0.0
        ratio = FINAL_DECLARE_RATIO if round_number >= max_rounds else DECLARE_RATIO
        if best_score >= DECLARE_MIN_SCORE and best_score >= ratio * runner_up:
            return f"I know the word! It is {best}."
        if len(positive) > NUM_SUSPECTS:
            return DEFENDER_ASSOCIATION.format(positive[NUM_SUSPECTS][0])
    return DEFENDER_STALL


def attacker_message(lexicon: Lexicon, target: str, related: list[str], clues: list[str],
                     own_messages: list[str]) -> str:
    said = [text_after_last(message, ATTACK_PREFIX).strip() for message in own_messages]
    return f"{ATTACK_PREFIX} {attacker_hint(lexicon, target, related, clues, said)}"


def defender_message(lexicon: Lexicon, received: list[str], round_number: int, max_rounds: int) -> str:
    heard = [text_after_last(message, ATTACK_PREFIX) for message in received]
    return f"{DEFEND_PREFIX} {defender_reply(lexicon, heard, round_number, max_rounds)}"
