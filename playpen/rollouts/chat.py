"""Chat templating as token ids: the first prompt of a conversation, and the exact
environment tokens between two model turns.

The learner's view of a conversation is kept as ONE growing token sequence: the
first prompt, then per turn the generated ids and the templated game messages that
follow. Later turns are generated from that sequence, never from a re-rendered text,
so what a trainer gets is exactly what the model saw (re-tokenising generated text
can give different ids). That sequence equals a fresh render of the same conversation only
when the template is prefix-continuous: checked on a made-up conversation before multi-turn
training (:func:`warn_if_discontinuous`) and on each game's and role's first real
conversation in a process (:func:`warn_once_if_discontinuous`, called by the rollout loop).

Messages are normalised the way clemcore's HF backend does before templating:
consecutive messages of the same role are joined with a blank line, and an empty
leading system message is dropped.
"""
from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence

from jinja2.exceptions import TemplateError

# A string that no game message contains; marks where the model's turn sits in a render.
_SENTINEL = "\u2063PLAYPEN-MODEL-TURN\u2063"
_PREAMBLE = {"role": "user", "content": "."}
# what the check before training renders: any prefix-continuous template passes it
_MADE_UP = ({"role": "user", "content": "Say hello."}, {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": "Now say bye."})
# (tokenizer, template, template kwargs, game, role) whose real conversation was checked in this process
_CHECKED: set[tuple] = set()


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


def strip_system(messages: Iterable[dict]) -> list[dict]:
    return [m for m in messages if m.get("role") != "system"]


def template_kwargs_of(clem_model: Any) -> dict:
    """chat_template_kwargs of a clemcore HF model (empty for anything else)."""
    return dict(getattr(clem_model, "chat_template_kwargs", {}) or {})


def continuity_problem(tokenizer, template_kwargs: Optional[dict] = None) -> Optional[str]:
    """Why the chat template is not prefix-continuous on a made-up two-turn conversation, or
    None: :func:`conversation_problem`, cheap enough to run before training. A template that
    breaks only on a game's own messages (long prompts, whitespace around a reply, a system
    message) passes it; :func:`warn_once_if_discontinuous` checks those on the real episodes."""
    return conversation_problem(tokenizer, _MADE_UP, template_kwargs)


def conversation_problem(tokenizer, messages: Sequence[dict], template_kwargs: Optional[dict] = None) -> Optional[str]:
    """Why the turn-by-turn tokens of ``messages`` differ from the template's render of them,
    or None when they are equal (or there is no model turn followed by more messages).

    A multi-turn trajectory is the growing token sequence of the module docstring: the first
    prompt, the model's reply, the environment tokens after it, and so on. A template that
    renders an earlier turn differently once a later one exists (one that drops earlier
    reasoning, trims replies, adds a per-turn date or moves the system message) makes that
    sequence differ from a fresh render of the same conversation, so what the model saw while
    playing is not what the template gives for the history. The sequence is rebuilt here with
    the functions the rollout grows it with, each reply encoded from its text and closed with
    the EOS token (the ids a model generated may tokenise its text differently; that is not the
    template's doing), up to the prompt of the last assistant turn; the render is
    :func:`prompt_ids` of the same messages."""
    messages = normalize_messages(messages)
    while messages and messages[-1]["role"] == "assistant":
        messages.pop()  # the last reply: nothing follows it, the history ends before it
    replies = [i for i, m in enumerate(messages) if m["role"] == "assistant" and i > 0]
    if not replies:
        return None
    eos = tokenizer.eos_token_id  # a model ends its turn with it
    try:
        growing = prompt_ids(tokenizer, messages[:replies[0]], template_kwargs)
        for reply, end in zip(replies, [*replies[1:], len(messages)]):
            growing += _encode(tokenizer, messages[reply]["content"]) + ([eos] if eos is not None else [])
            growing += continuation_ids(tokenizer, messages[reply + 1:end], eos, template_kwargs)
        rendered = prompt_ids(tokenizer, messages, template_kwargs)
    except (ValueError, TemplateError) as e:
        return str(e)
    if growing == rendered:
        return None
    at = next((i for i, (a, b) in enumerate(zip(growing, rendered)) if a != b), min(len(growing), len(rendered)))
    # the same text in other tokens: a reply's first characters merge with the generation prompt's last
    seam = (" (the same text in other tokens: a reply and the template's text around it tokenise together "
            "in the render)" if tokenizer.decode(growing) == tokenizer.decode(rendered) else "")
    return (f"after {at} tokens the turn-by-turn sequence has {tokenizer.decode(growing[at:at + 8])!r} where "
            f"the template's render of the whole conversation has {tokenizer.decode(rendered[at:at + 8])!r}{seam}")


def warn_if_discontinuous(tokenizer, name: str, template_kwargs: Optional[dict] = None,
                          echo=lambda line: print(line, flush=True)) -> Optional[str]:
    """Say in one line, before multi-turn training, when ``name``'s chat template is not
    prefix-continuous on a made-up conversation (:func:`continuity_problem`); returns the
    problem or None."""
    problem = continuity_problem(tokenizer, template_kwargs)
    if problem is not None:
        echo(_warning(name, "", problem))
    return problem


def warn_once_if_discontinuous(tokenizer, name: str, game: str, role: str, messages: Sequence[dict],
                               template_kwargs: Optional[dict] = None,
                               echo=lambda line: print(line, flush=True)) -> Optional[str]:
    """Say in one line when ``name``'s chat template is not prefix-continuous on ``messages``,
    the conversation of a ``role`` player in ``game`` (:func:`conversation_problem`): the rollout
    loop calls it for every finished episode's learner conversation, and trainers that learn
    from re-rendered conversations for theirs. Checked once per tokenizer, template, game and
    role in a process (the first conversation with a reply followed by more messages), so it costs
    one render per game and role, not one per episode. Returns the problem or None."""
    # the template's key, not the model's name: a population's members share one line
    template = tokenizer.chat_template
    key = (getattr(tokenizer, "name_or_path", ""), template if template is None or isinstance(template, str)
           else repr(template), repr(sorted((template_kwargs or {}).items())), game, role)
    if key in _CHECKED:
        return None
    if not any(m["role"] == "assistant" for m in messages[1:-1]):
        return None  # one turn: no history to compare yet; a later episode is checked
    _CHECKED.add(key)
    problem = conversation_problem(tokenizer, messages, template_kwargs)
    if problem is not None:
        echo(_warning(name, f" on {game} ({role})", problem))
    return problem


def _warning(name: str, where: str, problem: str) -> str:
    return (f"[playpen] the chat template of {name} is not prefix-continuous{where}: {problem}. Multi-turn episodes "
            f"are trained on the tokens the model saw turn by turn; a fresh render of the same conversation "
            f"(another trainer, an evaluation that re-renders) would give other tokens")
