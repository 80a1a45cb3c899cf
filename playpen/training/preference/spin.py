"""SPIN (self-play fine-tuning, Chen et al. 2024) over games: the data half of
``playpen run spin`` (:class:`~playpen.training.preference.trainer.SPINTrainer`).

Each round samples ``--pairs-per-round`` demonstration turns — the assistant turns of
won episodes by the games' programmatic players (``--demo-model``, or any registered
model), or of ``--records``/``--dataset`` — and lets the learner, as the round starts,
answer in the same context: the demonstration is chosen, the learner's own generation
rejected. Contexts are the demonstrations' conversations up to that turn; the learner's
prompt is rendered as the rollout engine renders a first prompt
(:func:`playpen.rollouts.chat.prompt_ids`) and its generation keeps the generated ids
(:func:`playpen.inference.engine.generate`), so the rejected turn is exactly what the
model produced. A generation equal to the demonstration gives no pair. A chat template that
is not prefix-continuous on a game's demonstrations is named once per game and role
(:func:`playpen.rollouts.chat.warn_once_if_discontinuous`): SPIN trains on fresh renders of
the history, the model plays on the tokens it saw turn by turn. The DPO loss of
each round (:mod:`playpen.training.preference`) has the round's starting policy as its
reference, which is SPIN's opponent.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Sequence

from playpen.errors import DatasetError
from playpen.inference import engine
from playpen.inference.types import SamplingConfig
from playpen.pairs import PreferencePair
from playpen.rollouts import chat
from playpen.rollouts.chat import template_kwargs_of
from playpen.training.common import lifecycle
from playpen.training.common.config import option
from playpen.training.preference.rounds import turn_ids
from playpen.training.sft.demonstrations import supervised_records


@dataclass
class SPINOptions:
    """SPIN's rounds and how many demonstration turns each compares."""

    rounds: int = option(3, "rounds: each generates the rejected turns with the policy the previous round "
                            "ended with and trains --max-steps/--rounds steps from it")
    pairs_per_round: int = option(32, "demonstration turns per round (chosen: the demonstration; rejected: the "
                                      "learner's own answer in the same context)")
    generation_batch_size: int = option(16, "contexts answered in one generate call")


@dataclass(frozen=True)
class Context:
    """A demonstration turn: the conversation before it and the demonstrator's answer."""

    prompt: tuple[dict, ...]
    answer: str
    meta: dict


def demonstration_turns(records: Sequence[dict]) -> list[Context]:
    """Every assistant turn of the records (``{messages, meta}``) that follows a message."""
    out = []
    for record in records:
        messages = record["messages"]
        for i, message in enumerate(messages):
            if message["role"] == "assistant" and i > 0:
                prompt = tuple({"role": m["role"], "content": m["content"]} for m in messages[:i])
                meta = dict(record.get("meta", {}), turn=sum(m["role"] == "assistant" for m in prompt))
                out.append(Context(prompt, message["content"], meta))
    return out


class SpinCollector:
    """``(round, policy) -> pairs``: demonstration turns chosen, the policy's answers rejected.

    `trainer` is the trainer (learner, config with DemonstrationOptions and SPINOptions,
    seed, output_dir); the demonstrations are read or played once, here.
    """

    def __init__(self, trainer):
        cfg = trainer.config
        self.cfg = cfg
        self.tokenizer = lifecycle.tokenizer_of(trainer.learner)
        self.template_kwargs = template_kwargs_of(trainer.learner)
        records = supervised_records(cfg, trainer.output_dir)
        for record in records:  # SPIN learns on fresh renders of them; the model plays turn by turn
            meta = record.get("meta", {})
            chat.warn_once_if_discontinuous(self.tokenizer, trainer.learner.name, meta.get("game", "?"),
                                            meta.get("game_role", "?"), record["messages"], self.template_kwargs)
        self.contexts = demonstration_turns(records)
        if not self.contexts:
            raise DatasetError("the demonstrations hold no assistant turn after a message: nothing to compare")
        # -T/-L of `playpen run`: how the learner answers (greedy by default: its most likely turn)
        self.sampling = SamplingConfig.from_gen_args(getattr(trainer.learner, "gen_args", None),
                                                     max_batch_size=cfg.generation_batch_size)
        self.seed = trainer.seed
        self.last_metrics: dict[str, float] = {}

    def __call__(self, round_: int, policy: Any) -> list[PreferencePair]:
        cfg = self.cfg
        rng = random.Random(self.seed * 1009 + round_)
        contexts = list(self.contexts)
        rng.shuffle(contexts)
        chosen, prompts = [], []
        for context in contexts:
            ids = chat.prompt_ids(self.tokenizer, context.prompt, self.template_kwargs)
            if len(ids) < cfg.max_length:  # longer prompts would leave no room for the turn
                chosen.append(context)
                prompts.append(ids)
            if len(chosen) == cfg.pairs_per_round:
                break
        if not chosen:
            raise DatasetError(f"every demonstration prompt has --max-length {cfg.max_length} tokens or more")
        import torch
        with torch.no_grad():
            answers = engine.generate(policy, self.tokenizer, prompts, self.sampling)
        pairs, same = [], 0
        for context, ids, answer in zip(chosen, prompts, answers):
            if answer.text.strip() == context.answer.strip():
                same += 1  # the learner already gives the demonstrator's answer: nothing to push apart
                continue
            meta = {**context.meta, "source": "spin", "round": round_,
                    "chosen": {"model": context.meta.get("model")}, "rejected": {"model": "learner"}}
            pairs.append(PreferencePair(context.prompt, context.answer, answer.text, meta, tuple(ids),
                                        tuple(turn_ids(self.tokenizer, context.prompt, context.answer,
                                                       self.template_kwargs)),
                                        tuple(answer.token_ids)))
        self.last_metrics = {"spin/contexts": len(chosen), "spin/same_as_demonstration": same,
                             "spin/rejected_tokens_mean": sum(len(a.token_ids) for a in answers) / len(answers)}
        if not pairs:
            raise DatasetError(f"round {round_}: the learner answered all {len(chosen)} demonstration turns "
                               f"exactly as demonstrated; nothing left to learn from them")
        return pairs
