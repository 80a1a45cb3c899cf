"""Self-rewarding with LoRA: the learner's candidate turns, scored by a judge (the learner
itself or any registered model), best vs worst trained with DPO; rounds.

    playpen run examples/trl/self_rewarding_trainer_lora.py -l smol-135m -t programmatic -T 1.0 -L 40 \\
        --games referencegame --roles "Instruction Follower" --init-adapter models/sft+lora/smol-135m/checkpoint-8
    playpen run examples/trl/self_rewarding_trainer_lora.py -l smol-135m -t programmatic --judge gpt-4o-mini \\
        --judge-template game-aware
    playpen run examples/trl/self_rewarding_trainer_lora.py -l smol-135m -t programmatic --reward game
    playpen run examples/trl/self_rewarding_trainer_lora.py -l smol-135m -t programmatic --resume

Each of ``--rounds`` rounds plays ``--pair-instances`` training instances per role with
the policy the previous round ended with (the teacher ``-t`` in the other roles, or the
learner itself without one); the learner's turns ``--fork-turns`` (0 = the first move)
are branch points, each with ``--candidates`` sampled turns (``-T``; greedy means 1.0)
generated in the branch point's exact token context. They are ranked by

- ``--reward judge`` (default): the judge ``--judge`` (``learner``: the policy as the round
  starts — self-rewarding proper; or a registered model, local or a remote API model)
  answers the prompt ``--judge-template`` (``additive``: a 5-point checklist; ``game-aware``:
  the checklist with what winning means in each game; or a Jinja file of your own) and
  ``--score-regex`` (a file; default reads ``Score: N``) reads a score in
  ``[--score-min, --score-max]`` from the reply. Replies without a score are counted
  (``judge/unparsed``), written to ``playpen-log.jsonl`` (``judge_unparsed`` lines) and
  skipped; a round where no reply gives a score stops with one line, before training.
- ``--reward game``: the game's own outcome — each candidate's episode is finished with
  the partner and the forked player's reward ranks them.

Each branch point gives one pair, best chosen and worst rejected (ties: none), trained
with TRL's DPOTrainer and a LoRA adapter; the reference is the policy the round starts
from (the model with the adapter disabled, or a frozen copy of the adapter it starts
from: never a second copy of the model). Judge prompts and replies never become
training data. Adapters go to
``models/self-rewarding+lora/<learner>/<reward>-.../checkpoint-N`` with each round's pairs
(``pairs-round-R.jsonl``: the judge's scores in ``meta``), the log (``memory/peak_rss_mb``
included) and the curve; the run is then evaluated on the held-out instances.

The same trainer by name: ``playpen run self-rewarding ...`` (``playpen run --list``). Its code, to
read top to bottom: ``playpen/training/preference/trainer.py``. A trainer file of your own imports it (or
subclasses it) as this one does.
"""

from playpen.training.preference.trainer import SelfRewardingTrainer  # noqa: F401  (the trainer `playpen run` finds in this file)
