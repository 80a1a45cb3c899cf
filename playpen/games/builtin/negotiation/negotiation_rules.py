"""Moves and arithmetic of the negotiation game. Parsers raise only clemcore's ParseError,
whatever the input; allocations are tuples of counts in the order of the instance's items."""
from __future__ import annotations

import itertools
import re

from clemcore.clemgame.errors import ParseError

PROPOSE, ACCEPT, REJECT = "PROPOSE", "ACCEPT", "REJECT"
_PAIR = re.compile(r"^([a-z]+)\s*=\s*([0-9]+)$")


def format_allocation(items: list[str], counts) -> str:
    """`book=2, hat=0, ball=1`: the move syntax, also used in the prompts."""
    return ", ".join(f"{item}={count}" for item, count in zip(items, counts))


def parse_move(response, items: list[str], counts: list[int]) -> tuple[str, tuple[int, ...] | None]:
    """(PROPOSE, counts the speaker takes) | (ACCEPT, None) | (REJECT, None) from a one-line
    reply `PROPOSE: book=2, hat=0, ball=1`, `ACCEPT` or `REJECT` (keywords and item names in
    any case; every item exactly once, counts within the pool)."""
    if not isinstance(response, str):
        raise ParseError(f"response is not text but {type(response).__name__}", str(response), key="type")
    text = response.strip()
    if not text:
        raise ParseError("empty response", response, key="empty")
    if len(text.splitlines()) != 1:
        raise ParseError("the reply must be exactly one line", response, key="lines")
    word = text.rstrip(".!").strip()
    if word.isascii() and word.upper() in (ACCEPT, REJECT):
        return word.upper(), None
    head, colon, body = text.partition(":")
    if not colon or not head.isascii() or head.strip().upper() != PROPOSE:
        raise ParseError("the reply must be 'PROPOSE: <item>=<count>, ...', 'ACCEPT' or 'REJECT'",
                         response, key="move")
    taken: dict[str, int] = {}
    for part in body.split(","):
        match = _PAIR.match(part.strip().lower()) if part.strip().isascii() else None
        if match is None:
            raise ParseError(f"'{part.strip()}' is not '<item>=<count>'", response, key="pair")
        item, count = match.group(1), int(match.group(2))
        if item not in items:
            raise ParseError(f"unknown item '{item}' (items: {', '.join(items)})", response, key="item")
        if item in taken:
            raise ParseError(f"item '{item}' is listed twice", response, key="item")
        limit = counts[items.index(item)]
        if count > limit:
            raise ParseError(f"there are only {limit} of '{item}'", response, key="count")
        taken[item] = count
    missing = [item for item in items if item not in taken]
    if missing:
        raise ParseError(f"the proposal must list every item; missing: {', '.join(missing)}", response,
                         key="item")
    return PROPOSE, tuple(taken[item] for item in items)


def points(values, taken) -> int:
    return sum(v * n for v, n in zip(values, taken))


def rest(counts, taken) -> tuple[int, ...]:
    return tuple(c - n for c, n in zip(counts, taken))


def all_allocations(counts):
    """Every split of the pool: the counts one side takes."""
    return itertools.product(*(range(c + 1) for c in counts))


def best_joint(counts, values_a, values_b) -> int:
    """The largest sum of both sides' points over all splits: every item goes to whoever
    values it more."""
    return sum(c * max(a, b) for c, a, b in zip(counts, values_a, values_b))


def is_pareto_optimal(counts, values_a, values_b, taken_a) -> bool:
    """No other split gives one side more points and the other no fewer."""
    mine, theirs = points(values_a, taken_a), points(values_b, rest(counts, taken_a))
    for other in all_allocations(counts):
        a, b = points(values_a, other), points(values_b, rest(counts, other))
        if a >= mine and b >= theirs and (a > mine or b > theirs):
            return False
    return True
