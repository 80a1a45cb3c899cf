"""The one planner of shared prompt prefixes: rows grouped so that each group's common prefix
is computed once. Generation plans with it (:func:`playpen.inference.prefill.prefill_then_decode`:
rows without a kept cache; :mod:`playpen.inference.hf_generate`: a batch's shared prefix), both
prefilling the planned prefixes with the one sharer, :func:`playpen.inference.prefill.prefill_prefixes`;
training's forward passes run with it too (:mod:`playpen.training.shared_prefix`)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


@dataclass(frozen=True)
class PrefixPlan:
    """Rows grouped by shared prefix: ``groups[g] = (prefix_length, row indices)``."""

    groups: tuple[tuple[int, tuple[int, ...]], ...]

    def group_of(self, row: int) -> int:
        return next(g for g, (_, rows) in enumerate(self.groups) if row in rows)

    def prefix_of(self, row: int) -> int:
        return self.groups[self.group_of(row)][0]


def plan_prefixes(prompts: Sequence[Sequence[int]], keys: Optional[Sequence[str]] = None) -> PrefixPlan:
    """Contiguous groups (in sorted order) minimising prefilled tokens: a group's prefix
    is prefilled once, the rest of each of its prompts once per row. Every row keeps at
    least its last token for the generate call. Rows with different ``keys`` (their
    adapters: a KV cache belongs to one adapter) share no prefix."""
    keys = list(keys) if keys is not None else [""] * len(prompts)
    order = sorted(range(len(prompts)), key=lambda i: (keys[i], list(prompts[i])))
    lengths = [len(prompts[i]) for i in order]
    adjacent = [_common(prompts[a], prompts[b]) if keys[a] == keys[b] else 0 for a, b in zip(order, order[1:])]
    best = [0.0] + [math.inf] * len(order)
    choice = [(0, 0)] * (len(order) + 1)
    for j in range(1, len(order) + 1):
        prefix, total = lengths[j - 1] - 1, 0
        for i in range(j, 0, -1):  # the group order[i-1 .. j-1]
            if i < j:
                prefix = min(prefix, adjacent[i - 1], lengths[i - 1] - 1)
            total += lengths[i - 1]
            cost = best[i - 1] + prefix + total - (j - i + 1) * prefix
            if cost < best[j]:
                best[j], choice[j] = cost, (i, prefix)
    groups, j = [], len(order)
    while j > 0:
        i, prefix = choice[j]
        groups.append((prefix, tuple(sorted(order[i - 1:j]))))
        j = i - 1
    return PrefixPlan(tuple(sorted(groups, key=lambda g: g[1][0])))
