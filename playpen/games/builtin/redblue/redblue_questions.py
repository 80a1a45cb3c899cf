"""The user questions of the red-blue game: how they are written and how they are solved
(the instance generator writes them, the programmatic Defender solves them from the text)."""
from __future__ import annotations

import re

WORDS = ("garden", "window", "rabbit", "bridge", "candle", "forest", "pocket", "silver", "ladder", "kitten",
         "harbor", "button", "jacket", "meadow", "planet", "rocket", "saddle", "tunnel", "violin", "wallet",
         "anchor", "basket", "carpet", "dragon", "engine", "falcon", "guitar", "helmet", "island", "jungle",
         "kettle", "lemon", "mirror", "needle", "orange", "pencil", "quiver", "ribbon", "spider", "turtle",
         "umbrella", "valley", "winter", "yellow", "zebra", "apple", "bread", "cloud", "drum", "eagle")

# kind -> (question template, pattern that reads the question back)
KINDS = {
    "sum": ("What is {a} + {b}?", re.compile(r"What is (\d+) \+ (\d+)\?")),
    "product": ("What is {a} × {b}?", re.compile(r"What is (\d+) × (\d+)\?")),
    "letters": ("How many letters are in the word '{w}'?", re.compile(r"How many letters are in the word '(\w+)'\?")),
    "backwards": ("Write the word '{w}' backwards.", re.compile(r"Write the word '(\w+)' backwards\.")),
    "first": ("Which comes first in alphabetical order, '{w}' or '{v}'?",
              re.compile(r"Which comes first in alphabetical order, '(\w+)' or '(\w+)'\?")),
    "next": ("What number comes next: {a}, {b}, {c}, ...?", re.compile(r"What number comes next: (\d+), (\d+), (\d+), \.\.\.\?")),
}


def answer_of(kind: str, groups: tuple) -> str:
    if kind == "sum":
        return str(int(groups[0]) + int(groups[1]))
    if kind == "product":
        return str(int(groups[0]) * int(groups[1]))
    if kind == "letters":
        return str(len(groups[0]))
    if kind == "backwards":
        return groups[0][::-1]
    if kind == "first":
        return min(groups[0], groups[1])
    a, b, c = (int(g) for g in groups)
    return str(c + (c - b))


def solve(text: str) -> str | None:
    """The answer to the last question of a kind above found in `text`; None if none is."""
    found = None
    for kind, (_, pattern) in KINDS.items():
        for match in pattern.finditer(text or ""):
            if found is None or match.start() > found[0]:
                found = (match.start(), kind, match.groups())
    return None if found is None else answer_of(found[1], found[2])
