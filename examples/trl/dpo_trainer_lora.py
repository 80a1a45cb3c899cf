"""DPO with LoRA on preference pairs from games: branched episodes or recorded play.

    playpen run examples/trl/dpo_trainer_lora.py -l smol-135m -t programmatic -T 1.0 -L 40 \\
        --init-adapter models/sft+lora/smol-135m/checkpoint-8
    playpen run examples/trl/dpo_trainer_lora.py -l smol-135m --source records --records clembench-runs/v2.0
    playpen run examples/trl/dpo_trainer_lora.py -l smol-135m --source pairs --pairs-file pairs.jsonl
    playpen run examples/trl/dpo_trainer_lora.py -l smol-135m -t programmatic --resume

Pairs (``--source``):

- ``branching`` (default): ``--pair-instances`` training instances per role are played
  with the current policy; every episode forks at the learner's turn ``--fork-turns``
  (0 = the first move; ``0,1`` = the first and the second, in separate episodes) into
  ``--branches`` continuations, which the partner finishes — the teacher ``-t`` (a
  registered model or ``programmatic``) in the other roles, or the learner itself
  without one. The branches are ranked by the forked player's reward (aborted < lost <
  won, graded by the game's Main Score); every two with different rewards give a pair
  whose prompt is the fork's token sequence, exactly as the model saw it. Episodes are
  recorded under ``<output_dir>/dpo+lora/<learner>/branching-<partner>/``.
- ``records``: ``--records DIR``, any results folder (clem run output, clembench-runs,
  playpen records): a won and a lost or aborted episode of the same instance and role
  give a pair at the first turn of that role where they part.
- ``pairs``: ``--pairs-file FILE`` (``playpen dataset RESULTS --pairs -o FILE``).

Training: TRL's DPOTrainer with a LoRA adapter; the reference of the DPO loss is the
same model with the adapter disabled (``ref_model=None``), or a frozen copy of the
starting adapter when the run starts from one (``--init-adapter``), never a second
copy of the model. ``--rounds R`` splits ``--max-steps`` into R rounds, each collecting
new pairs with the policy the previous round ended with (iterative DPO).

Adapters go to ``models/dpo+lora/<learner>/<source>/checkpoint-N`` with each round's
pairs (``pairs-round-R.jsonl``), the log (``playpen-log.jsonl``: loss, reward margins,
pair counts, ``memory/peak_rss_mb``) and the curve; the run is then evaluated on the
held-out instances (with the teacher as partner when there is one).

The same trainer by name: ``playpen run dpo ...`` (``playpen run --list``). Its code, to
read top to bottom: ``playpen/training/preference/trainer.py``. A trainer file of your own imports it (or
subclasses it) as this one does.
"""

from playpen.training.preference.trainer import DPOGamesTrainer  # noqa: F401  (the trainer `playpen run` finds in this file)
