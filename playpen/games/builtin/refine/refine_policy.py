"""The programmatic Generator and Critic of the refine game.

Critic: runs the checker on the draft and names every unmet requirement in a fixed
phrasing (one instruction per line), or says the draft meets them all.

Generator: writes a quick first draft that ignores the requirements (`<Topic> is full of
<association>.`), then revises by following the critiques it has received — only those:
it reads instructions such as `Include the word 'x'`, `Remove the word 'y'`, `Start with
the word 'z'`, `End with '?'` (or 'a question mark') and `Use between 12 and 18 words`
(quoted words; other phrasings with the same verbs work too), and rebuilds the draft to
follow every instruction so far. So the final score measures the critic as much as the
generator. A revision without a length instruction keeps to the length of the draft
before it (a reviser should not grow a text nobody asked to grow)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from refine_rules import check_draft, words

FILLER = ("while", "friends", "gather", "around", "to", "share", "stories", "on", "a", "calm", "and", "clear",
          "evening", "that", "nobody", "wants", "to", "forget", "for", "a", "long", "time", "after", "it", "ends")
QUOTED = r"['\"‘“]([A-Za-z]+)['\"’”]"
INCLUDE = re.compile(r"\b(?:include|add|mention|insert)\b[^'\"‘“\n]*" + QUOTED, re.IGNORECASE)
EXCLUDE = re.compile(r"\b(?:remove|drop|avoid|delete|without|replace)\b[^'\"‘“\n]*" + QUOTED, re.IGNORECASE)
START = re.compile(r"\b(?:start|begin)\w*\b[^'\"‘“\n]*" + QUOTED, re.IGNORECASE)
END_MARK = re.compile(r"\b(?:end|finish)\w*\b[^\n]*?(?:['\"‘“]([.!?])['\"’”]|(question mark|exclamation mark|full stop|period))",
                      re.IGNORECASE)
BETWEEN = re.compile(r"between (\d+) and (\d+) words", re.IGNORECASE)
AT_LEAST = re.compile(r"at least (\d+) words", re.IGNORECASE)
AT_MOST = re.compile(r"at most (\d+) words", re.IGNORECASE)
SENTENCE_BREAK = re.compile(r"(?<=[.!;])\s+|\n")
MARK_NAMES = {"question mark": "?", "exclamation mark": "!", "full stop": ".", "period": "."}


@dataclass
class Instructions:
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    start: str | None = None
    end: str | None = None
    min_words: int | None = None
    max_words: int | None = None

    def read(self, critique: str) -> None:
        """Add the instructions of one critique (later ones win), sentence by sentence."""
        for sentence in SENTENCE_BREAK.split(critique):
            excluded = [w.lower() for w in EXCLUDE.findall(sentence)]
            for word in excluded:
                if word not in self.exclude:
                    self.exclude.append(word)
                self.include = [w for w in self.include if w != word]
            for word in (w.lower() for w in INCLUDE.findall(sentence)):
                if word not in excluded and word not in self.include:
                    self.include.append(word)
                    self.exclude = [w for w in self.exclude if w != word]
            start = START.search(sentence)
            if start:
                self.start = start.group(1)
            end = END_MARK.search(sentence)
            if end:
                self.end = end.group(1) or MARK_NAMES[end.group(2).lower()]
            between = BETWEEN.search(sentence)
            if between:
                self.min_words, self.max_words = int(between.group(1)), int(between.group(2))
            if AT_LEAST.search(sentence):
                self.min_words = int(AT_LEAST.search(sentence).group(1))
            if AT_MOST.search(sentence):
                self.max_words = int(AT_MOST.search(sentence).group(1))


def first_draft(topic: str, association: str) -> str:
    return f"{topic[0].upper()}{topic[1:]} is full of {association}."


def compose(topic: str, association: str, instructions: Instructions) -> str:
    """A draft that follows every instruction so far."""
    banned = set(instructions.exclude)
    core = [w for w in words(topic) + ["is", "full", "of"]] + [association if association.lower() not in banned else "wonder"]
    core = [w for w in core if w.lower() not in banned]
    extra = []
    for word in instructions.include:
        extra += ["and", word]
    head = [instructions.start] if instructions.start else []
    filler = [w for w in FILLER if w.lower() not in banned]
    body = core + extra
    low = instructions.min_words or 0
    high = instructions.max_words or 10_000
    pad = []
    while len(head) + len(body) + len(pad) < low and len(pad) < len(filler):
        pad.append(filler[len(pad)])
    text_words = head + body + pad
    while len(text_words) > high and len(text_words) > len(head) + len(extra) + 1:
        # drop core words first, never the start word or the required words
        index = len(head)
        text_words.pop(index)
    text = " ".join(text_words)
    if not instructions.start and text:
        text = text[0].upper() + text[1:]
    return text + (instructions.end or ".")


def generator_reply(topic: str, association: str, critiques: list[str], previous: str = "") -> str:
    """The next draft: the first one, or a revision following `critiques` (all so far);
    without a length instruction a revision is no longer than the `previous` draft."""
    if not critiques:
        return f"DRAFT: {first_draft(topic, association)}"
    instructions = Instructions()
    for critique in critiques:
        instructions.read(critique)
    if instructions.max_words is None and previous:
        instructions.max_words = len(words(previous))
    return f"DRAFT: {compose(topic, association, instructions)}"


def critic_reply(draft: str, constraints: dict) -> str:
    results = check_draft(draft, constraints)
    lines = []
    if not results["length"]:
        lines.append(f"- Use between {constraints['min_words']} and {constraints['max_words']} words "
                     f"(the draft has {len(words(draft))}).")
    for word in constraints["include"]:
        if not results[f"include:{word}"]:
            lines.append(f"- Include the word '{word}'.")
    for word in constraints["exclude"]:
        if not results[f"exclude:{word}"]:
            lines.append(f"- Remove the word '{word}'.")
    if not results["start"]:
        lines.append(f"- Start with the word '{constraints['start']}'.")
    if not results["end"]:
        lines.append(f"- End with '{constraints['end']}'.")
    if not lines:
        return "CRITIQUE: The draft meets every requirement; keep it as it is."
    return "CRITIQUE: The draft misses some requirements:\n" + "\n".join(lines)
