"""Chat templating as token ids: the first prompt of a conversation, and the exact
environment tokens between two model turns.

The learner's view of a conversation is kept as ONE growing token sequence: the
first prompt, then per turn the generated ids and the templated game messages that
follow. Later turns are generated from that sequence, never from a re-rendered text,
so what a trainer gets is exactly what the model saw (re-tokenising generated text
can give different ids).

Messages are normalised the way clemcore's HF backend does before templating:
consecutive messages of the same role are joined with a blank line, and an empty
leading system message is dropped.
"""
from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence

# A string that no game message contains; marks where the model's turn sits in a render.
_SENTINEL = "\u2063PLAYPEN-MODEL-TURN\u2063"
_PREAMBLE = {"role": "user", "content": "."}


def normalize_messages(messages: Iterable[dict]) -> list[dict]:
    """role/content only; consecutive same-role messages merged with "\\n\\n"."""
    out: list[dict] = []
    for message in messages:
        role, content = message["role"], message["content"]
        if out and out[-1]["role"] == role:
            out[-1] = {"role": role, "content": f"{out[-1]['content']}\n\n{content}"}
        else:
            out.append({"role": role, "content": content})
    if out and out[0]["role"] == "system" and not out[0]["content"]:
        out.pop(0)
    return out


def _render(tokenizer, messages: Sequence[dict], add_generation_prompt: bool,
            template_kwargs: Optional[dict]) -> str:
    return tokenizer.apply_chat_template(list(messages), add_generation_prompt=add_generation_prompt,
                                         tokenize=False, **(template_kwargs or {}))


def _encode(tokenizer, text: str) -> list[int]:
    # the template already holds BOS and every special token as text
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def prompt_ids(tokenizer, messages: Sequence[dict], template_kwargs: Optional[dict] = None) -> list[int]:
    """Token ids of the templated conversation, ending with the generation prompt."""
    return _encode(tokenizer, _render(tokenizer, normalize_messages(messages), True, template_kwargs))


def continuation_ids(tokenizer, new_messages: Sequence[dict], last_model_token: Optional[int],
                     template_kwargs: Optional[dict] = None) -> list[int]:
    """The environment tokens after a model turn: the rest of the turn's closing markup,
    the templated ``new_messages`` and the next generation prompt.

    ``last_model_token`` is the last id the model generated. When the model closed its
    turn itself (its last token renders as the template's end-of-turn text), that text
    is not repeated; when it stopped at ``max_new_tokens`` the closing markup is part of
    the environment tokens.
    """
    rendered = _render(tokenizer,
                       [_PREAMBLE, {"role": "assistant", "content": _SENTINEL},
                        *normalize_messages(new_messages)],
                       True, template_kwargs)
    index = rendered.find(_SENTINEL)
    if index < 0:
        raise ValueError("the chat template dropped the assistant turn; cannot compute the "
                         "environment tokens between model turns")
    tail = rendered[index + len(_SENTINEL):]
    if last_model_token is not None:
        closing = tokenizer.decode([last_model_token], skip_special_tokens=False)
        if closing and tail.startswith(closing):
            tail = tail[len(closing):]
    return _encode(tokenizer, tail)


def warn_if_discontinuous(tokenizer, name: str, template_kwargs: Optional[dict] = None,
                          echo=lambda line: print(line, flush=True)) -> Optional[str]:
    """Say in one line, before multi-turn training, when ``name``'s chat template is not
    prefix-continuous (:func:`continuity_problem`); returns the problem or None."""
    problem = continuity_problem(tokenizer, template_kwargs)
    if problem is not None:
        echo(f"[playpen] the chat template of {name} is not prefix-continuous: {problem}. Multi-turn episodes "
             f"are trained on the tokens the model saw turn by turn; a fresh render of the same conversation "
             f"(another trainer, an evaluation that re-renders) would give other tokens")
    return problem


def strip_system(messages: Iterable[dict]) -> list[dict]:
    return [m for m in messages if m.get("role") != "system"]


def template_kwargs_of(clem_model: Any) -> dict:
    """chat_template_kwargs of a clemcore HF model (empty for anything else)."""
    return dict(getattr(clem_model, "chat_template_kwargs", {}) or {})


def continuity_problem(tokenizer, template_kwargs: Optional[dict] = None) -> Optional[str]:
    """Why the chat template is not prefix-continuous, or None when it is.

    A multi-turn trajectory is the growing token sequence above: the first prompt, the
    model's reply, the environment tokens after it, and so on. A template that renders an
    earlier turn differently once a later one exists (one that drops earlier reasoning, or
    adds a per-turn date) makes that sequence differ from a fresh render of the same
    conversation, so what the model saw while playing is not what the template gives for the
    history. Checked on a two-turn conversation: the growing sequence must equal the render."""
    first, reply, second = ({"role": "user", "content": "Say hello."}, {"role": "assistant", "content": "Hello."},
                            {"role": "user", "content": "Now say bye."})
    eos = tokenizer.eos_token_id
    try:
        growing = (prompt_ids(tokenizer, [first], template_kwargs) + _encode(tokenizer, reply["content"])
                   + ([eos] if eos is not None else [])
                   + continuation_ids(tokenizer, [second], eos, template_kwargs))
        rendered = prompt_ids(tokenizer, [first, reply, second], template_kwargs)
    except ValueError as e:
        return str(e)
    if growing == rendered:
        return None
    at = next((i for i, (a, b) in enumerate(zip(growing, rendered)) if a != b), min(len(growing), len(rendered)))
    return (f"after {at} tokens the turn-by-turn sequence has {tokenizer.decode(growing[at:at + 8])!r} where "
            f"the template's render of the whole conversation has {tokenizer.decode(rendered[at:at + 8])!r}")
