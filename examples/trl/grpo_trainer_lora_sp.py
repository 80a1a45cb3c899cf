"""Online GRPO with LoRA in self-play: the learner plays every role of the games.

    playpen run examples/trl/grpo_trainer_lora_sp.py -l smol-135m -T 1.0 -L 40
    playpen run examples/trl/grpo_trainer_lora_sp.py -l smol-135m --init-adapter models/sft+lora/smol-135m/checkpoint-8
    playpen run examples/trl/grpo_trainer_lora_sp.py -l smol-135m --resume      # after Ctrl-C or a crash

Each optimizer step plays ``--groups-per-step`` groups. A group is one training instance
and one role, played ``--num-generations`` times; the role's turns in those episodes are
trained with that role's reward (default: outcome reward, aborted < lose < success, graded
by the game's Main Score), normalised within the group. Game-master and partner tokens
are masked out of the loss. In self-play the roles of an instance share its episodes.
``-T`` is the sampling temperature of the rollouts (0 is replaced by 1.0: greedy groups
carry no signal) and ``-L`` the tokens per turn.

Against collapse to a private protocol and forgetting of other games (docs/trainers.md):

    playpen run examples/trl/grpo_trainer_lora_sp.py -l smol-135m --init-adapter ADAPTER --baseline chance
    playpen run examples/trl/grpo_trainer_lora_sp.py -l smol-135m --partners programmatic:0.5,self:0.3,past:0.2
    playpen run examples/trl/grpo_trainer_lora_sp.py -l smol-135m --game-shares referencegame:0.7,taboo:0.3

Records of every episode go to ``<output_dir>/grpo+lora/<learner>/selfplay/`` (clemcore
layout: ``clem score``/``transcribe`` work on them), checkpoints (adapters) to
``models/grpo+lora/<learner>/selfplay/checkpoint-N``, metrics (loss, reward per role,
% played, KL, tokens/s) to ``playpen-log.jsonl`` and ``learning-curve.png`` there and to the
tracker of ``--report-to``. At the end the adapter is evaluated on the held-out instances.

The same trainer by name: ``playpen run grpo ...`` (``playpen run --list``). Its code, to
read top to bottom: ``playpen/training/grpo/trainer.py``. A trainer file of your own imports it (or
subclasses it) as this one does.
"""

from playpen.training.grpo.trainer import GRPOSelfPlayTrainer  # noqa: F401  (the trainer `playpen run` finds in this file)
