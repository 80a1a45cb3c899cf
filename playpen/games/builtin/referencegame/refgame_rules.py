"""Response formats of the reference game. Both parsers raise only clemcore's
ParseError, whatever the input."""
from __future__ import annotations

from clemcore.clemgame.errors import ParseError

EXPRESSION_PREFIX = "expression"
ANSWER_PREFIX = "answer"
ANSWER_POSITIONS = {"first": 1, "second": 2, "third": 3, "1": 1, "2": 2, "3": 3}
POSITION_WORDS = {1: "first", 2: "second", 3: "third"}


def split_tagged_line(response, tag: str) -> str:
    """The content of a one-line reply `<tag>: <content>` (tag case-insensitive,
    surrounding whitespace ignored). Raises ParseError for anything else,
    including an empty content or a repeated tag."""
    if not isinstance(response, str):
        raise ParseError(f"response is not text but {type(response).__name__}", str(response), key="type")
    text = response.strip()
    if not text:
        raise ParseError("empty response", response, key="empty")
    if len(text.splitlines()) != 1:
        raise ParseError("the reply must be exactly one line", response, key="lines")
    head, colon, content = text.partition(":")
    if not colon or not head.isascii() or head.strip().lower() != tag:
        raise ParseError(f"the reply must start with '{tag.capitalize()}:'", response, key="prefix")
    content = content.strip()
    if not content:
        raise ParseError(f"nothing follows '{tag.capitalize()}:'", response, key="content")
    repeated, colon, _ = content.partition(":")
    if colon and repeated.isascii() and repeated.strip().lower() == tag:
        raise ParseError(f"'{tag.capitalize()}:' is repeated", response, key="prefix")
    return content


def parse_expression(response) -> str:
    """The referring expression of an `Expression: ...` reply."""
    return split_tagged_line(response, EXPRESSION_PREFIX)


def parse_answer(response) -> int:
    """The chosen position (1, 2 or 3) of an `Answer: first|second|third|1|2|3` reply."""
    content = split_tagged_line(response, ANSWER_PREFIX)
    position = ANSWER_POSITIONS.get(content.lower()) if content.isascii() else None
    if position is None:
        raise ParseError("the answer must be one of first, second, third, 1, 2, 3", response, key="answer")
    return position
