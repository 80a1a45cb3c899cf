"""Stage pipelines: example trainers one after another, each starting from the adapter the
previous one ended with.

    playpen run examples/trl/pipeline_trainer_lora.py -l smol-135m -L 40 --stages sft,spin,dpo,grpo
    playpen run examples/trl/pipeline_trainer_lora.py -l smol-135m -t programmatic --stages sft,dpo \\
        --stage-steps 8,4 --stage-options 'dpo: --beta 0.2 --roles "Instruction Follower"'
    playpen run examples/trl/pipeline_trainer_lora.py -l smol-135m --stages sft,spin --resume

Stages (any order, any number; a name may repeat): ``sft`` (sft_trainer_lora.py), ``spin``,
``dpo``, ``self-rewarding``, ``grpo`` (grpo_trainer_lora_mp.py with the teacher ``-t`` in the
other roles, grpo_trainer_lora_sp.py without one), ``spag``. Every stage runs with its own
trainer's options: ``--games``, ``--train-instances``, ``--max-steps`` (or ``--stage-steps``,
one number per stage), ``--learning-rate``, ``--save-steps``, ``--save-total-limit`` and
``--report-to`` go to every stage that has them (unset: each stage's own default);
``--stage-options 'dpo: --beta 0.2; grpo: --num-generations 4'`` to single stages. The
first stage starts from ``--init-adapter`` (or a fresh adapter), every later one from the
previous stage's last adapter.

The run folder ``models/pipeline/<learner>/<stages>/`` holds each stage's own models folder
(``1-sft/sft+lora/<learner>/checkpoint-N``, ``2-dpo/...``) and ``pipeline-state.json`` (the
finished stages and their adapters, written atomically after every stage). ``--resume``
skips the finished stages and continues the one that stopped (from its last checkpoint);
``--overwrite`` starts over. The last adapter is evaluated on the held-out instances
(``results/<learner>+pipeline-<stages>/``). An unknown stage, a stage option its trainer
does not know, an adapter of another base model: one line, exit code 2, before any model
loads.

The same trainer by name: ``playpen run pipeline ...`` (``playpen run --list``). Its code, to
read top to bottom: ``playpen/training/pipeline/trainer.py``. A trainer file of your own imports it (or
subclasses it) as this one does.
"""

from playpen.training.pipeline.trainer import PipelineTrainer  # noqa: F401  (the trainer `playpen run` finds in this file)
