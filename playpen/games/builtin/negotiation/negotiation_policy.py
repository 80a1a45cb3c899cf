"""The programmatic negotiator: concedes step by step from a high demand and gives away
what the other side seems to want most.

It knows its own values and the pool (its prompt states them) and learns about the other
side only from the other side's proposals: an item the other side keeps claiming is taken
to be worth more to it. Its demand falls linearly from 8 of its 10 points at its first
turn to 4 at the last; it accepts an offer that meets its current demand, and on the last
turn any offer worth more than nothing."""
from __future__ import annotations

from negotiation_rules import ACCEPT, REJECT, all_allocations, format_allocation, points, rest

HIGH_DEMAND, LOW_DEMAND = 8.0, 4.0


def demand(turn: int, max_turns: int) -> float:
    """The points the policy insists on at `turn` (1-based)."""
    if max_turns <= 1:
        return LOW_DEMAND
    return HIGH_DEMAND - (HIGH_DEMAND - LOW_DEMAND) * (turn - 1) / (max_turns - 1)


def estimate_other_values(counts, other_proposals, total: float = 10.0) -> list[float]:
    """Per-unit values of the other side, guessed from what it asked for (uniform prior)."""
    weights = [1.0] * len(counts)
    for taken in other_proposals:
        for i, (n, c) in enumerate(zip(taken, counts)):
            weights[i] += 2.0 * n / c
    scale = total / sum(c * w for c, w in zip(counts, weights))
    return [w * scale for w in weights]


def choose_move(items, counts, values, turn: int, max_turns: int, other_proposals, pending) -> str:
    """The reply at `turn`: `pending` is the split the other side proposed last (what it
    takes) if it is still on the table, `other_proposals` every split it proposed."""
    if pending is not None:
        offered = points(values, rest(counts, pending))
        if offered >= demand(turn, max_turns) or (turn >= max_turns and offered > 0):
            return ACCEPT
    if turn >= max_turns:
        return REJECT  # nobody could accept a proposal now
    other_values = estimate_other_values(counts, other_proposals)
    need = demand(turn, max_turns)
    best = max((taken for taken in all_allocations(counts) if points(values, taken) >= need),
               key=lambda taken: (round(points(other_values, rest(counts, taken)), 6),
                                  points(values, taken), tuple(-n for n in taken)))
    return f"PROPOSE: {format_allocation(items, best)}"
