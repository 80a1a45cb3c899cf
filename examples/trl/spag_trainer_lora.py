"""SPAG with LoRA on adversarial_taboo: imitation with a KL term, then epochs of self-play and
offline policy optimisation (Cheng et al., "Self-playing Adversarial Language Game Enhances
LLM Reasoning").

    playpen run examples/trl/spag_trainer_lora.py -l smol-135m -T 1.0 -L 40
    playpen run examples/trl/spag_trainer_lora.py -l smol-135m --epochs 3 --episodes-per-epoch 32
    playpen run examples/trl/spag_trainer_lora.py -l smol-135m --init-adapter models/sft+lora/smol-135m/checkpoint-8
    playpen run examples/trl/spag_trainer_lora.py -l smol-135m -t programmatic     # evaluate against it
    playpen run examples/trl/spag_trainer_lora.py -l smol-135m --resume             # after Ctrl-C or a crash

1. Imitation (``--imitation-steps``, 0 = none): the SFT loss on the demonstrations' assistant
   turns plus ``--imitation-kl`` × KL(policy ‖ reference), the reference being the same model
   with the adapter disabled (never a second copy). Demonstrations as for SFT: ``--dataset``,
   ``--records``, else the training instances played by ``--demo-model`` (default: the
   programmatic Attacker and Defender); each role's turns only from the episodes it won
   (``--imitate-winners``).
2. ``--epochs`` SPAG epochs, each: the learner plays both roles on ``--episodes-per-epoch``
   sampled training instances (``-T``, 0 → 1.0; ``-L``); rule-based rewards from the game's
   outcome per role (``--win-reward``/``--tie-reward``/``--lose-reward``; ``--abort-reward``
   for the role that broke the format); ``--max-steps`` steps of offline policy optimisation:
   importance ratio against the reference (``--spag-reference behaviour``: the policy that
   played the epoch; ``base``: the adapter disabled) clipped to ``1 ± --clip``, advantage =
   reward − ``--beta`` × KL, the winners' samples only (``--no-winners-only`` keeps all),
   every role weighing half (``--role-balance``), optionally plus ``--sft-coef`` × SFT on the
   imitation data. Phases ``SPAG-1`` … ``SPAG-N``.

Everything goes to ``models/spag+lora/<learner>/`` (``checkpoint-N`` at each phase's end, N
its last step, ``playpen-run.json`` naming them under ``phases``; ``playpen-log.jsonl`` with
``memory/peak_rss_mb``, the curve); self-play episodes to
``<output_dir>/spag+lora/<learner>/``. The last adapter is evaluated on the held-out instances
(``results/<learner>+spag+lora-checkpoint-N/``): in self-play, or as the Attacker against the
teacher ``-t`` when one is given. One AdamW state and learning-rate schedule run through all
phases (``--lr-scheduler-type``, ``--max-grad-norm``).

The same trainer by name: ``playpen run spag ...`` (``playpen run --list``). Its code, to
read top to bottom: ``playpen/training/spag/trainer.py``. A trainer file of your own imports it (or
subclasses it) as this one does.
"""

from playpen.training.spag.trainer import SPAGTrainer  # noqa: F401  (the trainer `playpen run` finds in this file)
