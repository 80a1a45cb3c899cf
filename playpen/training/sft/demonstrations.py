"""Supervised fine-tuning data: conversational records → token ids with assistant masks.

A record is ``{"messages": [{"role", "content"}, ...], "meta": {"game", "game_role",
"outcome", ...}}`` (one per episode and player; see ``playpen.data``). Records come from
a dataset file (``.jsonl`` or a ``.json`` list), from a folder of clemcore results
(``clem run`` output or playpen records, read by ``playpen.data`` with the programmatic
players included: they are the demonstrators), or are played on demand by a programmatic
teacher on the games' training instances (:func:`play_demonstrations`).

Loss only on the assistant turns: TRL's ``assistant_only_loss`` needs ``{% generation %}``
markers in the chat template and can only patch the templates it knows (SmolLM2's is
not one of them), so the masks are computed here for ANY chat template that renders
a conversation's prefixes as prefixes of the whole: the tokens between the render of
``messages[:i]`` with the generation prompt and the render of ``messages[:i+1]`` are the
i-th assistant turn (its text and end-of-turn marker) — exactly what the model must
produce after the generation prompt at inference. SFTTrainer applies the resulting
``assistant_masks`` column itself.

:func:`supervised_dataset` is the data half of the SFT trainers
(:mod:`playpen.training.sft.trainer`); they hold the TRL half.
"""
from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Mapping, Optional, Sequence

from playpen.data import DatasetFilter, read_dataset_file, read_results
from playpen.distributed import main_first
from playpen.errors import DatasetError
from playpen.evaluation import play, score
from playpen.files import write_json
from playpen.models import load_model_by_name
from playpen.registry import TRAIN_INSTANCES, game_specs
from playpen.rollouts.chat import normalize_messages
from playpen.training.common.config import split_list


# ----------------------------------------------------------------------------- reading

DEMONSTRATIONS_MARKER = "playpen-demonstrations.json"


def play_demonstrations(games: Sequence[str], out_dir: str | Path, *, model: str = "programmatic",
                        instances: str = TRAIN_INSTANCES, max_instances: Optional[int] = None,
                        batch_size: int = 16, items: Optional[Mapping[str, Sequence[str]]] = None) -> Path:
    """Play the games' training instances with `model` in every role (default: the games'
    programmatic players) into ``out_dir/<instances>/<model>/`` (clemcore layout); returns
    that run folder. `items` (game -> its items, a ``--split``): only those instances, into
    ``out_dir/<instances>-<digest of the items>/<model>/``.

    A set is used only when complete: ``playpen-demonstrations.json`` in the run folder,
    written last (atomically) once a game's episodes are played and scored, lists each
    complete game with its number of episodes and ``max_instances``. A game missing from it
    (an interrupted or failed attempt), played with another ``max_instances``, or whose
    episode count no longer matches is played again from scratch; complete games are kept.
    """
    # demonstrations of different instance sets never mix
    out_dir = Path(out_dir) / (instances if items is None else f"{instances}-{items_digest(items, games)}")
    run_dir = out_dir / model
    marker = run_dir / DEMONSTRATIONS_MARKER
    complete = _complete_games(marker, run_dir, max_instances)
    missing = [g for g in games if g not in complete]
    if not missing:
        return run_dir
    specs = game_specs(missing, instances)
    if complete or any((run_dir / g).exists() for g in missing):
        print(f"[playpen] demonstrations in {run_dir}: playing {', '.join(missing)} "
              f"({'incomplete or missing' if complete else 'an incomplete earlier attempt'}); "
              f"keeping {', '.join(sorted(complete)) or 'nothing'}", flush=True)
    player = load_model_by_name(model)
    if marker.exists():  # the games about to be played are not complete until marked again
        write_json(marker, {"model": model, "instances": instances, "games": complete}, indent=1)
    # overwrite: a missing game's folder holds no complete set (at most an interrupted attempt)
    run_dir = play(specs, [player], results_dir=out_dir, batch_size=batch_size,
                   max_instances=max_instances, overwrite=True, items=items)
    score(specs, run_dir)
    for spec in specs:
        complete[spec.game_name] = {"episodes": _num_episodes(run_dir / spec.game_name),
                                    "max_instances": max_instances}
    write_json(marker, {"model": model, "instances": instances, "games": complete}, indent=1)
    return run_dir


def items_digest(items: Mapping[str, Sequence[str]], games: Sequence[str]) -> str:
    """A short name of the games' chosen items: equal sets share their demonstrations."""
    chosen = {game: sorted(items[game]) for game in games}
    return hashlib.sha256(json.dumps(chosen, sort_keys=True).encode()).hexdigest()[:12]


def _num_episodes(game_dir: Path) -> int:
    return sum(1 for _ in game_dir.rglob("interactions.json"))


def _complete_games(marker: Path, run_dir: Path, max_instances: Optional[int]) -> dict:
    """The games the marker lists as complete whose episodes are all still there."""
    try:
        listed = json.loads(marker.read_text(encoding="utf-8"))["games"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return {game: info for game, info in listed.items()
            if isinstance(info, dict) and info.get("max_instances") == max_instances
            and info.get("episodes") == _num_episodes(run_dir / game) > 0}


# ----------------------------------------------------------------------------- tokenising

def assistant_spans(tokenizer, messages: Sequence[dict], template_kwargs: Optional[dict] = None
                    ) -> tuple[str, list[tuple[int, int]]]:
    """The rendered conversation and the character spans of its assistant turns."""
    messages = normalize_messages(messages)
    kwargs = dict(tokenize=False, **(template_kwargs or {}))
    text = tokenizer.apply_chat_template(messages, **kwargs)
    spans = []
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        before = tokenizer.apply_chat_template(messages[:i], add_generation_prompt=True, **kwargs) if i else ""
        upto = tokenizer.apply_chat_template(messages[:i + 1], **kwargs)
        if not text.startswith(upto) or not upto.startswith(before):
            raise DatasetError("the chat template does not render a conversation's prefixes as "
                               "prefixes of the whole; assistant-only loss cannot be computed for it")
        spans.append((len(before), len(upto)))
    return text, spans


def tokenize_conversation(tokenizer, messages: Sequence[dict], max_length: Optional[int] = None,
                          template_kwargs: Optional[dict] = None) -> dict:
    """``{"input_ids", "assistant_masks"}``: mask 1 on every token inside an assistant turn."""
    text, spans = assistant_spans(tokenizer, messages, template_kwargs)
    encoding = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = encoding["input_ids"], encoding["offset_mapping"]
    mask = [int(any(start <= s and e <= end for start, end in spans) and e > s) for s, e in offsets]
    if max_length is not None:
        ids, mask = ids[:max_length], mask[:max_length]
    return {"input_ids": list(ids), "assistant_masks": mask}


def tokenized_dataset(records: Sequence[dict], tokenizer, *, max_length: Optional[int] = 1024,
                  seed: int = 42, template_kwargs: Optional[dict] = None):
    """A shuffled ``datasets.Dataset`` of tokenised conversations (``input_ids``,
    ``assistant_masks``); examples whose assistant tokens were all truncated are dropped."""
    from datasets import Dataset
    rows = []
    for record in records:
        row = tokenize_conversation(tokenizer, record["messages"], max_length, template_kwargs)
        if any(row["assistant_masks"]):
            rows.append(row)
    if not rows:
        raise DatasetError(f"no trainable examples among {len(records)} records (no assistant turn "
                           f"within max_length={max_length})")
    random.Random(seed).shuffle(rows)
    return Dataset.from_list(rows)


# ----------------------------------------------------------------------------- a trainer's data

def supervised_records(config, output_dir: str | Path) -> list[dict]:
    """The conversations a supervised trainer learns from, by its config
    (:class:`~playpen.training.common.config.DemonstrationOptions` + ``games``): ``--dataset``,
    else ``--records``, else demonstrations played by ``--demo-model`` on the games'
    training instances into ``<output_dir>/demonstrations/``; kept by role and outcome."""
    games = split_list(config.games)
    if config.dataset:
        records = read_dataset_file(config.dataset)
    elif config.records:
        records = read_results(config.records)
    else:
        with main_first():  # a data-parallel run: rank 0 plays them, the others then find them complete
            demos = play_demonstrations(games, Path(output_dir) / "demonstrations", model=config.demo_model,
                                        instances=config.train_instances,
                                        max_instances=config.demo_max_instances or None,
                                        items=config.train_items)
        records = read_results(demos)
    keep = DatasetFilter(games=tuple(games), roles=tuple(split_list(config.roles)),
                         outcomes=tuple(split_list(config.outcomes)))
    records = [r for r in records if keep.keeps(r.get("meta", {}))]
    if not records:
        raise DatasetError(f"no episodes of {', '.join(games)} with outcome {config.outcomes} "
                           f"(roles: {config.roles or 'all'}) to learn from")
    return records


def supervised_dataset(config, output_dir: str | Path, tokenizer, seed: int = 42):
    """:func:`supervised_records` tokenised with assistant masks (a ``datasets.Dataset``)."""
    records = supervised_records(config, output_dir)
    dataset = tokenized_dataset(records, tokenizer, max_length=config.max_length, seed=seed)
    print(f"[playpen] {len(dataset)} conversations from {len(records)} records", flush=True)
    return dataset
