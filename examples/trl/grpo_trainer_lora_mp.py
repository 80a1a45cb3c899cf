"""Online GRPO with LoRA against a frozen teacher: the learner plays one role, the teacher
all the others.

    playpen run examples/trl/grpo_trainer_lora_mp.py -l smol-135m -t programmatic -T 1.0 -L 40
    playpen run examples/trl/grpo_trainer_lora_mp.py -l smol-135m -t my-remote --roles "Instruction Giver"
    playpen run examples/trl/grpo_trainer_lora_mp.py -l smol-135m -t programmatic --resume

The teacher is any registered model: a local HF model (batched with the learner's turns),
``programmatic`` (the games' own competent players) or a remote OpenAI-compatible model
from key.json (called concurrently). It is never trained. Every other option, the group
construction, the masking (teacher and game-master tokens carry no loss) and the
outputs are those of grpo_trainer_lora_sp.py; here a group is one
training instance played ``--num-generations`` times with the learner in one role
(``--roles``, default: each role in turn, each with its own group), and checkpoints go to
``models/grpo+lora/<learner>/<teacher>``, records to
``<output_dir>/grpo+lora/<learner>/<teacher>/``.

The same trainer by name: ``playpen run grpo-teacher ...`` (``playpen run --list``). Its code, to
read top to bottom: ``playpen/training/grpo/trainer.py``. A trainer file of your own imports it (or
subclasses it) as this one does.
"""

from playpen.training.grpo.trainer import GRPOTeacherTrainer  # noqa: F401  (the trainer `playpen run` finds in this file)
