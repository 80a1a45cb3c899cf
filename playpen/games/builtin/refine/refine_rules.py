"""Formats and the checker of the refine game. Parsers raise only clemcore's ParseError,
whatever the input. A task's constraints are a dict: `min_words`, `max_words`, `include`
(words), `exclude` (words), `start` (first word), `end` (the final mark: . ! or ?)."""
from __future__ import annotations

import re

from clemcore.clemgame.errors import ParseError

WORD = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z]+)?")
END_NAMES = {".": "a full stop", "!": "an exclamation mark", "?": "a question mark"}


def _tagged(response, tag: str) -> str:
    if not isinstance(response, str):
        raise ParseError(f"response is not text but {type(response).__name__}", str(response), key="type")
    text = response.strip()
    if not text:
        raise ParseError("empty response", response, key="empty")
    first, _, rest = text.partition("\n")
    head, colon, content = first.partition(":")
    if not colon or not head.isascii() or head.strip().upper() != tag:
        raise ParseError(f"the reply must start with '{tag}:'", response, key="prefix")
    body = "\n".join(part for part in (content.strip(), rest.strip()) if part)
    if not body:
        raise ParseError(f"nothing follows '{tag}:'", response, key="content")
    if re.match(rf"^\s*{tag}\s*:", body, re.IGNORECASE):
        raise ParseError(f"'{tag}:' is repeated", response, key="prefix")
    return body


def parse_draft(response) -> str:
    """The text of `DRAFT: <text>` (the text may continue on further lines)."""
    return _tagged(response, "DRAFT")


def parse_critique(response) -> str:
    """The text of `CRITIQUE: <text>` (the text may continue on further lines)."""
    return _tagged(response, "CRITIQUE")


def words(text: str) -> list[str]:
    return WORD.findall(text or "")


def has_word(text: str, word: str) -> bool:
    """`word` as a whole word, any case; for forbidden words a plural (-s, -es) counts too."""
    return re.search(rf"(?<![A-Za-z0-9]){re.escape(word)}(?:s|es)?(?![A-Za-z0-9])", text or "", re.IGNORECASE) is not None


def check_draft(text: str, constraints: dict) -> dict[str, bool]:
    """Constraint name -> whether the draft meets it (names: `length`, `include:<w>`,
    `exclude:<w>`, `start`, `end`)."""
    found = words(text)
    results = {"length": constraints["min_words"] <= len(found) <= constraints["max_words"]}
    for word in constraints["include"]:
        results[f"include:{word}"] = any(w.lower() == word.lower() for w in found)
    for word in constraints["exclude"]:
        results[f"exclude:{word}"] = not has_word(text, word)
    results["start"] = bool(found) and found[0].lower() == constraints["start"].lower()
    results["end"] = (text or "").rstrip().rstrip("\"'”’)").endswith(constraints["end"])
    return results


def score_draft(text: str, constraints: dict) -> float:
    """100 × the share of constraints met."""
    results = check_draft(text, constraints)
    return 100 * sum(results.values()) / len(results)


def describe(constraints: dict) -> list[str]:
    """The requirements as the prompts state them, one per line."""
    lines = [f"between {constraints['min_words']} and {constraints['max_words']} words"]
    lines += [f"contains the word '{w}'" for w in constraints["include"]]
    lines += [f"never uses the word '{w}' (nor its plural)" for w in constraints["exclude"]]
    lines.append(f"starts with the word '{constraints['start']}'")
    lines.append(f"ends with {END_NAMES[constraints['end']]} '{constraints['end']}'")
    return lines
