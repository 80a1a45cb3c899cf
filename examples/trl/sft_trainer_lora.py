"""Supervised fine-tuning with LoRA on won episodes; loss on the assistant turns only.

    playpen run examples/trl/sft_trainer_lora.py -l smol-135m
    playpen run examples/trl/sft_trainer_lora.py -l smol-135m --games referencegame,wordle --max-steps 8
    playpen run examples/trl/sft_trainer_lora.py -l smol-135m --dataset my_episodes.jsonl
    playpen run examples/trl/sft_trainer_lora.py -l smol-135m --resume     # after Ctrl-C or a crash
    playpen run examples/trl/sft_trainer_lora.py -l smol-135m --games taboo --dev-every 20 --dev-patience 2 --dev-splits FILE

Data (first that applies): ``--dataset FILE`` (JSON lines of {messages, meta}), ``--records
DIR`` (clemcore results / playpen records), else the games' training instances played
by ``--demo-model`` (default: the games' programmatic players) into
``<output_dir>/demonstrations/``. Only the episodes whose outcome is in ``--outcomes``
(default: success) and whose role is in ``--roles`` (default: all roles) are kept.

Adapters (only) go to ``models/sft+lora/<learner>/checkpoint-N``; the run is then
evaluated on the held-out instances (``results/<learner>+sft+lora-checkpoint-N/``), the
metrics are in ``playpen-log.jsonl`` and the curve in ``learning-curve.png`` beside the
checkpoints. Evaluate an adapter later with
``playpen eval -m LEARNER --adapter models/sft+lora/<learner>/checkpoint-N``.

The same trainer by name: ``playpen run sft ...`` (``playpen run --list``). Its code, to
read top to bottom: ``playpen/training/sft/trainer.py``. A trainer file of your own imports it (or
subclasses it) as this one does.
"""

from playpen.training.sft.trainer import SFTLoraTrainer  # noqa: F401  (the trainer `playpen run` finds in this file)
