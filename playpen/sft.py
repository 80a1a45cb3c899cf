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

:func:`train_sft` is the whole ``learn()`` of the SFT example trainers
(examples/trl/sft_trainer_simple.py and sft_trainer_lora.py).
"""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Iterable, Optional, Sequence

from playpen import training
from playpen.data import OUTCOMES, DatasetError  # one error class for dataset conversion and SFT


# ----------------------------------------------------------------------------- reading

def read_dataset_file(path: str | Path) -> list[dict]:
    """Records from a ``.jsonl`` file (one per line) or a ``.json`` list."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"dataset file '{path}' does not exist")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        records = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise DatasetError(f"{path}:{number}: malformed JSON: {e.msg}") from e
    else:
        try:
            records = json.loads(text)
        except json.JSONDecodeError as e:
            raise DatasetError(f"{path}:{e.lineno}: malformed JSON: {e.msg}") from e
    if not isinstance(records, list):
        raise DatasetError(f"{path}: expected a list of records ({{messages, meta}})")
    for index, record in enumerate(records):
        if not isinstance(record, dict) or not isinstance(record.get("messages"), list):
            raise DatasetError(f"{path}: record {index} has no 'messages' list")
    return records


def read_results(folder: str | Path) -> list[dict]:
    """Records of every episode under a results/records folder (any depth), programmatic
    players included: they are the demonstrators. A thin wrapper of
    ``playpen.data.conversational_records(folder, include_programmatic=True)`` (malformed
    or partial episode folders are skipped) that names the ``--records`` folder in errors."""
    from playpen.data import conversational_records
    if not Path(folder).is_dir():
        raise DatasetError(f"records folder '{folder}' does not exist")
    records, _ = conversational_records(folder, include_programmatic=True)
    return records


def select(records: Iterable[dict], *, games: Sequence[str] = (), roles: Sequence[str] = (),
           outcomes: Sequence[str] = ("success",)) -> list[dict]:
    """Keep records of the given games, game roles (or player names) and outcomes
    (empty = any)."""
    for outcome in outcomes:
        if outcome not in OUTCOMES:
            raise DatasetError(f"unknown outcome '{outcome}'; valid: {', '.join(OUTCOMES)}")
    kept = []
    for record in records:
        meta = record.get("meta", {})
        if games and meta.get("game") not in games:
            continue
        if roles and meta.get("game_role") not in roles and meta.get("player_name") not in roles:
            continue
        if outcomes and meta.get("outcome") not in outcomes:
            continue
        kept.append(record)
    return kept


def play_demonstrations(games: Sequence[str], out_dir: str | Path, *, model: str = "programmatic",
                        instances: str = "instances_train", max_instances: Optional[int] = None,
                        batch_size: int = 16) -> Path:
    """Play the games' training instances with `model` in every role (default: the games'
    programmatic players) into ``out_dir/<instances>/<model>/`` (clemcore layout); returns
    that run folder.

    An existing run folder for the same model is reused when it already holds all games.
    """
    from playpen.evaluation import game_specs, load_eval_model, play, score
    out_dir = Path(out_dir) / instances  # demonstrations of different instance sets never mix
    run_dir = out_dir / model
    missing = [g for g in games if not any((run_dir / g).rglob("interactions.json"))]
    if not missing:
        return run_dir
    specs = game_specs(missing, instances)
    player = load_eval_model(model)
    # overwrite: a missing game's folder holds no finished episode (at most a failed attempt's)
    run_dir = play(specs, [player], results_dir=out_dir, batch_size=batch_size,
                   max_instances=max_instances, overwrite=True)
    score(specs, run_dir)
    return run_dir


# ----------------------------------------------------------------------------- tokenising

def assistant_spans(tokenizer, messages: Sequence[dict], template_kwargs: Optional[dict] = None
                    ) -> tuple[str, list[tuple[int, int]]]:
    """The rendered conversation and the character spans of its assistant turns."""
    from playpen.chat import normalize_messages
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


def build_dataset(records: Sequence[dict], tokenizer, *, max_length: Optional[int] = 1024,
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


def write_records(records: Sequence[dict], path: str | Path) -> Path:
    """Write records as JSON lines (the format ``--dataset`` reads)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


# ----------------------------------------------------------------------------- training

def train_sft(playpen, *, kind: str, peft_config=None) -> Optional[Path]:
    """Supervised fine-tuning of ``playpen.learner`` on won episodes, assistant-only loss:
    the ``learn()`` of the SFT example trainers, whose config dataclass (``playpen.config``)
    holds the options. `peft_config`: the adapters to train (None: every parameter).

    Checkpoints go to ``<models_dir>/<kind>/<learner>/checkpoint-N``, the final evaluation
    on the held-out instances to ``<results_dir>/<learner>+<kind>-checkpoint-N/``; see
    :class:`playpen.training.TrainingRun`. Returns the last checkpoint.
    """
    from trl import SFTConfig, SFTTrainer

    cfg, learner = playpen.config, playpen.learner
    games = training.split_list(cfg.games)
    run = training.TrainingRun(playpen, Path(cfg.models_dir) / kind / training.safe_name(learner.name), games,
                               eval_prefix=f"{learner.name}+{kind}-")

    # 1. conversations: won episodes of the chosen roles
    if cfg.dataset:
        records = read_dataset_file(cfg.dataset)
    elif cfg.records:
        records = read_results(cfg.records)
    else:
        demos = play_demonstrations(games, playpen.output_dir / "demonstrations", model=cfg.demo_model,
                                    instances=cfg.train_instances, max_instances=cfg.demo_max_instances or None)
        records = read_results(demos)
    records = select(records, games=games, roles=training.split_list(cfg.roles),
                     outcomes=training.split_list(cfg.outcomes))
    if not records:
        raise DatasetError(f"no episodes of {', '.join(games)} with outcome {cfg.outcomes} "
                           f"(roles: {cfg.roles or 'all'}) to learn from")
    tokenizer = training.tokenizer_of(learner)
    dataset = build_dataset(records, tokenizer, max_length=cfg.max_length, seed=playpen.seed)
    print(f"[playpen] {len(dataset)} conversations from {len(records)} records", flush=True)

    # 2. TRL: the assistant_masks column restricts the loss to assistant tokens
    args = SFTConfig(
        output_dir=str(run.run_dir), max_steps=cfg.max_steps, per_device_train_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps, learning_rate=cfg.learning_rate,
        lr_scheduler_type="constant_with_warmup", warmup_steps=0, max_length=cfg.max_length,
        logging_steps=1, save_strategy="steps", save_steps=cfg.save_steps,
        save_total_limit=cfg.save_total_limit, report_to=training.report_to(cfg.report_to), seed=playpen.seed,
        gradient_checkpointing=False, dataloader_num_workers=0, disable_tqdm=True, **training.precision_kwargs())
    trainer = SFTTrainer(model=training.model_of(learner), args=args, train_dataset=dataset,
                         processing_class=tokenizer, peft_config=peft_config, callbacks=[run.trainer_callback()])

    # 3. train (Ctrl-C saves a checkpoint and stops); 4. evaluate the trained model on the
    #    held-out instances, write the summary and the learning curve
    checkpoint = run.train(trainer)
    run.finish(saved="checkpoint" if peft_config is None else "adapter", num_examples=len(dataset))
    return checkpoint
