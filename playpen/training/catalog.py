"""The packaged trainers by name: ``playpen run sft -l smol-135m``, ``playpen run --list``,
the pipeline's stages.

Data, not imports: each entry names the class by its module path, so listing the trainers
(or a typo in a name) costs no torch, transformers or TRL import; :func:`trainer_class`
imports the one asked for. The files in ``examples/trl/`` run the same classes.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

from playpen.errors import TrainerFileError
from playpen.registry import close_matches


@dataclass(frozen=True)
class TrainerEntry:
    name: str
    target: str  # "module:Class"
    summary: str  # one line for `playpen run --list`
    example: str  # the example file that runs it (examples/trl/)


TRAINERS = {entry.name: entry for entry in [
    TrainerEntry("sft", "playpen.training.sft.trainer:SFTLoraTrainer",
                 "SFT with LoRA on won episodes (assistant-only loss)", "sft_trainer_lora.py"),
    TrainerEntry("sft-full", "playpen.training.sft.trainer:SFTSimpleTrainer",
                 "full fine-tuning on won episodes (assistant-only loss)", "sft_trainer_simple.py"),
    TrainerEntry("grpo", "playpen.training.grpo.trainer:GRPOSelfPlayTrainer",
                 "online GRPO with LoRA in self-play: the learner plays every role", "grpo_trainer_lora_sp.py"),
    TrainerEntry("grpo-teacher", "playpen.training.grpo.trainer:GRPOTeacherTrainer",
                 "online GRPO with LoRA; a frozen teacher (-t) plays the other roles", "grpo_trainer_lora_mp.py"),
    TrainerEntry("hierarchical-grpo", "playpen.training.hierarchy.trainer:HierarchicalGRPOTrainer",
                 "GRPO with LoRA over proposer-solver: propose problems, solve them",
                 "hierarchical_grpo_trainer_lora.py"),
    TrainerEntry("dpo", "playpen.training.preference.trainer:DPOGamesTrainer",
                 "DPO with LoRA on pairs from branched episodes or recorded play", "dpo_trainer_lora.py"),
    TrainerEntry("spin", "playpen.training.preference.trainer:SPINTrainer",
                 "SPIN with LoRA: demonstrations chosen, the learner's own answers rejected", "spin_trainer_lora.py"),
    TrainerEntry("self-rewarding", "playpen.training.preference.trainer:SelfRewardingTrainer",
                 "self-rewarding with LoRA: judged candidates, best vs worst, DPO",
                 "self_rewarding_trainer_lora.py"),
    TrainerEntry("expert-iteration", "playpen.training.expert_iteration.trainer:ExpertIterationTrainer",
                 "expert iteration with LoRA: the learner's own won episodes, round by round, SFT",
                 "expert_iteration_trainer_lora.py"),
    TrainerEntry("spag", "playpen.training.spag.trainer:SPAGTrainer",
                 "SPAG with LoRA on adversarial_taboo: imitation, then self-play epochs", "spag_trainer_lora.py"),
    TrainerEntry("fsp", "playpen.population.leagues:FictitiousSelfPlay",
                 "fictitious self-play with LoRA against frozen snapshots of past epochs", "fsp_trainer_lora.py"),
    TrainerEntry("league", "playpen.population.leagues:League",
                 "a league with LoRA: main agent, main exploiter, league exploiter", "league_trainer_lora.py"),
    TrainerEntry("pipeline", "playpen.training.pipeline.trainer:PipelineTrainer",
                 "stages of the trainers above, each from the previous stage's adapter", "pipeline_trainer_lora.py"),
]}


def listing() -> str:
    """``playpen run --list``: one line per trainer."""
    width = max(len(name) for name in TRAINERS)
    return "\n".join(f"{entry.name:<{width}}  {entry.summary}" for entry in TRAINERS.values())


def trainer_class(name: str) -> type:
    """The packaged trainer called `name` (imported now), or one line naming the valid names."""
    entry = TRAINERS.get(name)
    if entry is None:
        raise TrainerFileError(f"unknown trainer '{name}'.{close_matches(name, list(TRAINERS))} Trainers: "
                               f"{', '.join(TRAINERS)} (or a trainer file, TRAINER.py)")
    module, _, attr = entry.target.partition(":")
    return getattr(importlib.import_module(module), attr)
