"""SPIN with LoRA: rounds of DPO between demonstration turns (chosen) and the learner's
own answers in the same contexts (rejected).

    playpen run examples/trl/spin_trainer_lora.py -l smol-135m -L 40 --games referencegame --rounds 3
    playpen run examples/trl/spin_trainer_lora.py -l smol-135m --init-adapter models/sft+lora/smol-135m/checkpoint-8
    playpen run examples/trl/spin_trainer_lora.py -l smol-135m --records results/programmatic --roles Guesser
    playpen run examples/trl/spin_trainer_lora.py -l smol-135m --resume     # after Ctrl-C or a crash

Demonstrations (first that applies, as for SFT): ``--dataset FILE`` (JSON lines of
{messages, meta}), ``--records DIR`` (clemcore results / playpen records, programmatic
players included), else the games' training instances played by ``--demo-model``
(default: the games' programmatic players; any registered model, a teacher too) into
``<output_dir>/demonstrations/``; kept by ``--outcomes`` (default: success) and ``--roles``.

Each of ``--rounds`` rounds samples ``--pairs-per-round`` demonstration turns, lets the
learner — as the previous round left it — answer each in the same context (``-T``/``-L``:
greedy by default), and trains ``--max-steps/--rounds`` DPO steps with TRL's DPOTrainer:
the demonstration chosen, the learner's answer rejected, the round's starting policy as
the reference (round 1: the model with the adapter disabled; later rounds: a frozen copy
of the adapter the previous round ended with — never a second copy of the model).

Adapters go to ``models/spin+lora/<learner>/checkpoint-N`` (N counts the steps of all
rounds) with each round's pairs (``pairs-round-R.jsonl``), the log (``playpen-log.jsonl``,
``memory/peak_rss_mb`` included) and the curve; the run is then evaluated on the held-out
instances (``results/<learner>+spin+lora-checkpoint-N/``).

The same trainer by name: ``playpen run spin ...`` (``playpen run --list``). Its code, to
read top to bottom: ``playpen/training/preference/trainer.py``. A trainer file of your own imports it (or
subclasses it) as this one does.
"""

from playpen.training.preference.trainer import SPINTrainer  # noqa: F401  (the trainer `playpen run` finds in this file)
