"""Online GRPO with LoRA against a frozen teacher: the learner plays one role, the teacher
all the others.

    playpen run examples/trl/grpo_trainer_lora_mp.py -l smol-135m -t programmatic -T 1.0 -L 40
    playpen run examples/trl/grpo_trainer_lora_mp.py -l smol-135m -t my-remote --roles "Instruction Giver"
    playpen run examples/trl/grpo_trainer_lora_mp.py -l smol-135m -t programmatic --resume

The teacher is any registered model: a local HF model (batched with the learner's turns),
``programmatic`` (the games' own competent players) or a remote OpenAI-compatible model
from key.json (called concurrently). It is never trained. Every other option, the group
construction, the masking (teacher and game-master tokens carry no loss) and the
outputs are those of grpo_trainer_lora_sp.py (read it first); here a group is one
training instance played ``--num-generations`` times with the learner in one role
(``--roles``, default: each role in turn, each with its own group), and checkpoints go to
``models/grpo+lora/<learner>/<teacher>``, records to
``<output_dir>/grpo+lora/<learner>/<teacher>/``.
"""
from __future__ import annotations

from dataclasses import dataclass

from grpo_trainer_lora_sp import GRPOSelfPlayConfig, GRPOSelfPlayTrainer

from playpen.errors import PlaypenError
from playpen.training import safe_name


@dataclass
class GRPOTeacherConfig(GRPOSelfPlayConfig):
    """Same options as self-play; ``--roles`` picks the learner's roles."""


class GRPOTeacherTrainer(GRPOSelfPlayTrainer):
    """GRPO with LoRA; the learner plays one role, a frozen teacher the others."""

    config_class = GRPOTeacherConfig

    def partner(self):
        if self.teacher is None:
            raise PlaypenError("this trainer needs a teacher: pass -t/--teacher MODEL "
                               "(e.g. -t programmatic), or use grpo_trainer_lora_sp.py for self-play")
        return self.teacher, safe_name(self.teacher.name)
