"""Response format of the image game's Instruction Giver. The parser raises only
clemcore's ParseError, whatever the input (the follower's grid format lives in
imagegame_grids.parse_grid)."""
from __future__ import annotations

from clemcore.clemgame.errors import ParseError

COMMAND_PREFIX = "command"
DONE = "DONE"


def parse_command(response) -> str:
    """The content of a one-line `Command: ...` reply (prefix case-insensitive,
    surrounding whitespace ignored); DONE (any case) is returned as `DONE`.
    Raises ParseError for more lines, a missing/repeated prefix or an empty command."""
    if not isinstance(response, str):
        raise ParseError(f"response is not text but {type(response).__name__}", str(response), key="type")
    text = response.strip()
    if not text:
        raise ParseError("empty response", response, key="empty")
    if len(text.splitlines()) != 1:
        raise ParseError("the reply must be exactly one line", response, key="lines")
    head, colon, content = text.partition(":")
    if not colon or not head.isascii() or head.strip().lower() != COMMAND_PREFIX:
        raise ParseError("the reply must start with 'Command:'", response, key="prefix")
    content = content.strip()
    if not content:
        raise ParseError("nothing follows 'Command:'", response, key="content")
    repeated, colon, _ = content.partition(":")
    if colon and repeated.isascii() and repeated.strip().lower() == COMMAND_PREFIX:
        raise ParseError("'Command:' is repeated", response, key="prefix")
    return DONE if content.lower() == "done" else content
