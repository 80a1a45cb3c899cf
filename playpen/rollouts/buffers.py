"""The learner's token-exact view of one player's conversation, grown turn by turn.

Later turns are generated from this sequence, never from re-rendered text, so a trainer
gets exactly the ids the model saw (re-tokenising generated text can give other ids).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Optional, Sequence

from playpen.rollouts import chat


@dataclass
class TokenBuffer:
    """The learner's token-exact view of one player's conversation (one segment at a time)."""

    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    seen: list[dict] = field(default_factory=list)  # messages the model has seen, raw
    last_token: Optional[int] = None
    num_turns: int = 0
    segment: int = 0
    closed: list[tuple] = field(default_factory=list)  # earlier segments (history rewritten)

    def prepare(self, tokenizer, messages: Sequence[dict], template_kwargs: dict) -> list[int]:
        """Extend the sequence with the environment tokens for ``messages`` (the player's
        memory + new context); returns the ids to generate from."""
        messages = [{"role": m["role"], "content": m["content"]} for m in messages]
        if self.prompt_ids and messages[:len(self.seen)] == self.seen and len(messages) > len(self.seen):
            delta = chat.continuation_ids(tokenizer, messages[len(self.seen):], self.last_token,
                                          template_kwargs)
            self.completion_ids += delta
            self.env_mask += [0] * len(delta)
            self.logprobs += [0.0] * len(delta)
        else:
            if self.prompt_ids:  # the game rewrote the history: start a new segment
                self.closed.append(self._snapshot())
                self.segment += 1
                self.completion_ids, self.env_mask, self.logprobs = [], [], []
                self.num_turns = 0
            self.prompt_ids = chat.prompt_ids(tokenizer, messages, template_kwargs)
        self.seen = messages
        return self.prompt_ids + self.completion_ids

    def add_generation(self, token_ids: Sequence[int], logprobs: Sequence[float], text: str) -> None:
        self.completion_ids += token_ids
        self.env_mask += [1] * len(token_ids)
        self.logprobs += logprobs
        self.seen = self.seen + [{"role": "assistant", "content": text}]
        self.last_token = token_ids[-1] if token_ids else None
        self.num_turns += 1

    def _snapshot(self) -> tuple:
        return (self.segment, tuple(self.prompt_ids), tuple(self.completion_ids), tuple(self.env_mask),
                tuple(self.logprobs), self.num_turns, tuple(dict(m) for m in self.seen))

    def segments(self) -> list[tuple]:
        return [*self.closed, self._snapshot()] if self.prompt_ids else list(self.closed)

    def copy(self) -> "TokenBuffer":
        return copy.deepcopy(self)

