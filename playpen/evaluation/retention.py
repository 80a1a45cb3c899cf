"""How far training moved a model from where it started, measured on the start's own replies:
the log-likelihood, under each trained adapter, of the replies the starting adapter gave in
its greedy episodes (forward passes only).

Why: a game's score moves in steps of whole episodes, so a few dozen items resolve only large
changes. The mean log-probability per token of the start's replies changes with every weight
and every item counts, so it sees drift (forgetting) in the games and roles a trainer did not
train long before their scores fall. With the start's greedy replies y, ``log p_start(y) -
log p_after(y)`` is a one-sample estimate of the forward KL from the start to the trained
model at those prompts: 0 when nothing moved, larger the further the trained model moved away
from what the start does.

An *item* is one player's conversation in one episode (``game/experiment/game_id/player``);
its value is the mean log-probability per token of its assistant turns, each given the
conversation before it as the chat template renders it (the turn's closing tokens included).
:func:`drift` compares every adapter with the start item by item: the mean change per token,
the items that rose and fell, and the exact paired sign-flip p
(:func:`~playpen.evaluation.statistics.sign_flip_test`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Optional, Sequence

from playpen.errors import EvaluationError
from playpen.evaluation.statistics import sign_flip_test
from playpen.inference.logprobs import sequence_logprobs
from playpen.models import load_init_adapter


@dataclass(frozen=True)
class TurnRow:
    """One assistant turn: the token ids of the conversation up to and including it, and a
    mask that is 1 on the turn's own tokens."""

    item: str
    ids: tuple[int, ...]
    mask: tuple[int, ...]


def item_key(record: dict) -> str:
    meta = record.get("meta", {})
    return "/".join(str(meta.get(k, "?")) for k in ("game", "experiment", "game_id", "player_name"))


def turn_rows(tokenizer, records: Sequence[dict], template_kwargs: Optional[dict] = None) -> list[TurnRow]:
    """A :class:`TurnRow` per assistant turn of every record (a conversational record of
    :func:`playpen.data.conversational_records`). A turn whose conversation before it does not
    render as a prefix of the conversation with it is an EvaluationError naming the item: its
    reply tokens could not be told apart."""
    kwargs = dict(template_kwargs or {})
    rows = []
    for record in records:
        messages = record["messages"]
        for i, message in enumerate(messages):
            if message["role"] != "assistant":
                continue
            prompt = tokenizer.apply_chat_template(messages[:i], add_generation_prompt=True, tokenize=True, **kwargs)
            full = tokenizer.apply_chat_template(messages[:i + 1], tokenize=True, **kwargs)
            prompt, full = _ids(prompt), _ids(full)
            if full[:len(prompt)] != prompt or len(full) == len(prompt):
                raise EvaluationError(f"{item_key(record)}, turn {i}: the chat template's render of the conversation "
                                      f"before the reply is not a prefix of its render with the reply")
            rows.append(TurnRow(item_key(record), tuple(full), tuple([0] * len(prompt) + [1] * (len(full) - len(prompt)))))
    return rows


def _ids(rendered) -> list[int]:
    """transformers 5 returns a BatchEncoding from ``apply_chat_template(tokenize=True)``."""
    if hasattr(rendered, "keys") and "input_ids" in rendered:
        rendered = rendered["input_ids"]
    return list(rendered)


def item_logprobs(model, rows: Sequence[TurnRow]) -> dict[str, float]:
    """Item -> the mean log-probability per token of its turns under ``model`` (as it is:
    whichever adapter is active)."""
    import torch
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    with torch.no_grad():
        for row in rows:
            logps = sequence_logprobs(model, row.ids, row.mask)
            sums[row.item] = sums.get(row.item, 0.0) + float(logps.double().sum())
            counts[row.item] = counts.get(row.item, 0) + int(logps.numel())
    return {item: sums[item] / counts[item] for item in sums}


def adapters_logprobs(base_model, rows: Sequence[TurnRow], adapters: Mapping[str, str | Path]) -> dict[str, dict]:
    """Name -> item -> mean log-probability per token, each adapter loaded onto ``base_model``
    in turn (one copy of the base weights; the name ``base`` with path None: no adapter)."""
    return dict(each_adapter_logprobs(base_model, rows, adapters))


def each_adapter_logprobs(base_model, rows: Sequence[TurnRow], adapters: Mapping) -> Iterator[tuple]:
    """(key, item -> mean log-probability per token) for each entry of ``adapters`` (key ->
    adapter folder, None: the base model) as it is measured, so that a caller keeps each
    result before the next adapter loads."""
    peft_model = None
    for count, (name, path) in enumerate(adapters.items()):
        if path is None:
            if peft_model is not None:
                with peft_model.disable_adapter():
                    values = item_logprobs(peft_model, rows)
            else:
                values = item_logprobs(base_model, rows)
            yield name, values
            continue
        tag = f"a{count}"
        if peft_model is None:
            peft_model = load_init_adapter(base_model, path, trainable=False, name=tag)
        else:
            peft_model.load_adapter(str(path), adapter_name=tag, is_trainable=False)
        peft_model.set_adapter(tag)
        peft_model.eval()
        yield name, item_logprobs(peft_model, rows)


def drift(logprobs: Mapping[str, Mapping[str, float]], start: str) -> dict[str, dict]:
    """Every other adapter against ``start``, item by item: the mean change of the log-
    probability per token (negative: the start's replies became less likely), the items that
    rose and fell, and the exact two-sided sign-flip p."""
    reference = logprobs[start]
    out = {}
    for name, values in logprobs.items():
        if name == start:
            continue
        items = [i for i in reference if i in values]
        if not items:
            raise EvaluationError(f"{name} shares no item with {start}")
        changes = [values[i] - reference[i] for i in items]
        out[name] = {"items": len(items), "mean_change": sum(changes) / len(changes),
                     "rose": sum(c > 0 for c in changes), "fell": sum(c < 0 for c in changes),
                     "p": sign_flip_test(changes).p_value,
                     "mean_logprob": sum(values[i] for i in items) / len(items),
                     "start_mean_logprob": sum(reference[i] for i in items) / len(items)}
        if not math.isfinite(out[name]["mean_change"]):
            raise EvaluationError(f"{name}: a log-probability is not finite")
    return out
