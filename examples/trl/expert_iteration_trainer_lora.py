"""Expert iteration with LoRA: play, keep the learner's own won episodes, SFT on its turns, repeat.

    playpen run expert-iteration -l smol-135m -t programmatic -L 40 \
        --games taboo --roles Guesser --init-adapter models/sft+lora/smol-135m/checkpoint-8
    playpen run examples/trl/expert_iteration_trainer_lora.py -l smol-135m -L 40 --games taboo   # self-play
    playpen run examples/trl/expert_iteration_trainer_lora.py -l smol-135m --resume     # after Ctrl-C or a crash

Each of ``--rounds`` rounds plays ``--instances-per-round`` training instances
``--samples-per-instance`` times with the current policy (sampling at ``-T``; 1.0 when
greedy), the teacher (``-t``) in the roles the learner does not play; keeps the learner's
own turns of the won episodes (at most ``--top-k`` per instance, best scores first; never a
partner's turn) and trains ``--max-steps/--rounds`` SFT steps on them, the loss on the
tokens the learner generated.

Adapters go to ``models/expert-iteration+lora/<learner>[/<teacher>]/checkpoint-N`` beside
each round's kept trajectories (``round-R.jsonl``), the log and the curve; the run is then
evaluated on the held-out instances.

The same trainer by name: ``playpen run expert-iteration ...`` (``playpen run --list``). Its
code, to read top to bottom: ``playpen/training/expert_iteration/trainer.py``.
"""

from playpen.training.expert_iteration import ExpertIterationTrainer  # noqa: F401  (the trainer `playpen run` finds in this file)
