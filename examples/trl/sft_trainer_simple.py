"""Full fine-tuning on won episodes; loss on the assistant turns only.

    playpen run examples/trl/sft_trainer_simple.py -l smol-135m
    playpen run examples/trl/sft_trainer_simple.py -l smol-135m --games referencegame,wordle --max-steps 8
    playpen run examples/trl/sft_trainer_simple.py -l smol-135m --dataset my_episodes.jsonl
    playpen run examples/trl/sft_trainer_simple.py -l smol-135m --resume     # after Ctrl-C or a crash

Data (first that applies): ``--dataset FILE`` (JSON lines of {messages, meta}), ``--records
DIR`` (clemcore results / playpen records), else the games' training instances played
by ``--demo-model`` (default: the games' programmatic players) into
``<output_dir>/demonstrations/``. Only the episodes whose outcome is in ``--outcomes``
(default: success) and whose role is in ``--roles`` (default: all roles) are kept.

Checkpoints (full models with tokenizer, loadable as a ``huggingface_id``) go to
``models/sft/<learner>/checkpoint-N``; the run is then evaluated on the held-out
instances (``results/<learner>+sft-checkpoint-N/``), the metrics are in
``playpen-log.jsonl`` and the curve in ``learning-curve.png`` beside the checkpoints.
With LoRA instead: sft_trainer_lora.py.

The same trainer by name: ``playpen run sft-full ...`` (``playpen run --list``). Its code, to
read top to bottom: ``playpen/training/sft/trainer.py``. A trainer file of your own imports it (or
subclasses it) as this one does.
"""

from playpen.training.sft.trainer import SFTSimpleTrainer  # noqa: F401  (the trainer `playpen run` finds in this file)
