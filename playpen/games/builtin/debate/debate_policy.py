"""Programmatic debaters and the programmatic judge.

The judge decides by the checks: a CHECK line is *verified* when the calculation is right,
*false* when it is not, and *supporting* when it is verified, uses only numbers given in
the question and the facts (each at most as often as given there) and comes out at the
debater's answer. A side with a supporting check and no false check beats one without;
otherwise the side with fewer false checks, then more verified checks wins; a full tie
goes to Debater A.

A debater knows how to work the question out (the instance's solution). Defending the
correct answer it shows the calculation as a check; defending the wrong one it argues
without checks it could not make true, and in later rounds it points at the other side's
false checks, if any."""
from __future__ import annotations

import re
from collections import Counter

from clemcore.clemgame.errors import ParseError

from debate_rules import Turn, evaluate, format_number, numbers_in, parse_turn, same_number, uses_only

SECTION = re.compile(r"^=== Debater ([AB]), round \d+ ===$", re.MULTILINE)
QUESTION_LINE = re.compile(r"^Question: (.*)$", re.MULTILINE)
FACTS_LINE = re.compile(r"^Facts: (.*)$", re.MULTILINE)
END_OF_DEBATE = "=== End of the debate ==="


def debater_reply(answer: float, solution: str, opponent: str | None) -> str:
    """A debater's turn for the answer it defends; `opponent`: the other side's last turn."""
    shown = format_number(answer)
    rebuttal = ""
    if opponent is not None:
        try:
            turn = parse_turn(opponent)
        except ParseError:
            turn = None
        false = [c for c in turn.checks if not c.holds()] if turn else []
        if false:
            value = false[0].value()
            rebuttal = (f" The other side's check '{false[0].expression} = {format_number(false[0].claimed)}' is "
                        f"wrong: that calculation gives {'no number' if value is None else format_number(value)}.")
    correct = evaluate(solution)
    if correct is not None and same_number(correct, answer):
        return (f"ARGUMENT: Working the question out step by step with the numbers given gives {shown}."
                f"{rebuttal} The check below can be verified directly.\nCHECK: {solution} = {shown}\nANSWER: {shown}")
    return (f"ARGUMENT: Read the question carefully: every step has to be counted, and a slip in one of them "
            f"is easy to make. Counted with care, the result is {shown}.{rebuttal}\nANSWER: {shown}")


def side_rank(turns: list[Turn], allowed: Counter) -> tuple:
    """How strong one side's case is (higher is better)."""
    checks = [c for t in turns for c in t.checks]
    false = sum(not c.holds() for c in checks)
    verified = len(checks) - false
    supporting = any(c.holds() and uses_only(c.expression, allowed) and same_number(c.claimed, t.answer)
                     for t in turns for c in t.checks)
    return (supporting and false == 0, -false, verified)


def judge_reply(transcript: str) -> str:
    """The programmatic judge's `VERDICT: A|B` for a transcript as the game master shows it."""
    transcript = transcript.split(END_OF_DEBATE)[0]
    question = QUESTION_LINE.findall(transcript)
    facts = FACTS_LINE.findall(transcript)
    allowed = numbers_in(question[0] if question else "") + numbers_in(facts[0] if facts else "")
    turns: dict[str, list[Turn]] = {"A": [], "B": []}
    parts = SECTION.split(transcript)
    for side, body in zip(parts[1::2], parts[2::2]):
        try:
            turns[side].append(parse_turn(body.strip()))
        except ParseError:
            continue
    rank_a, rank_b = side_rank(turns["A"], allowed), side_rank(turns["B"], allowed)
    winner = "B" if rank_b > rank_a else "A"
    return f"Debater {winner}'s case is better supported by verifiable calculations.\nVERDICT: {winner}"
