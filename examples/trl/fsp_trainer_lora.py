"""Fictitious self-play with LoRA: the learner against frozen snapshots of its past epochs.

    playpen run examples/trl/fsp_trainer_lora.py -l smol-135m -T 1.0 -L 40 --games adversarial_taboo --epochs 4
    playpen run examples/trl/fsp_trainer_lora.py -l smol-135m -T 1.0 --opponents hard --init-adapter models/sft+lora/smol-135m/checkpoint-8

Every player is a LoRA adapter of ONE copy of the learner's model. Epoch e: ``learner-e``
enters as a copy of ``learner-(e-1)`` (the first: ``--init-adapter`` or a fresh adapter)
and plays ``--matches-per-epoch`` seatings, both seat orders, against the frozen snapshots
``learner-0 .. learner-(e-1)``, drawn uniformly (``--opponents uniform``) or by how often
they beat it (``hard``: (1 - win rate)^2; ``even``: win rate x (1 - win rate)); epoch 0 plays
itself. Each seating plays ``--instances-per-match`` training instances
``--num-generations`` times (a group: the baseline of its rewards); the turns of both
adapters are answered in one batched generate per step. Only the new snapshot trains
(GRPO's clipped objective, per-seat rewards), then it is frozen.

Outputs in ``<models-dir>/fsp+lora/<learner>/``: ``population/`` (population.json and one
adapter folder per player: ``playpen tournament -m smol-135m+<folder>`` plays them),
``records/epoch-N/`` (clemcore layout, ``clem score`` works), ``matches.jsonl``,
``metrics.jsonl``, ``ratings.json`` (Elo and OpenSkill after each epoch), ``ratings.png`` and
``checkpoint-E`` per epoch: Ctrl-C stops it (exit 130), ``--resume`` goes on after the last
complete epoch (docs/populations.md).

The same trainer by name: ``playpen run fsp ...`` (``playpen run --list``). Its code, to
read top to bottom: ``playpen/population/leagues.py``. A trainer file of your own imports it (or
subclasses it) as this one does.
"""

from playpen.population.leagues import FictitiousSelfPlay  # noqa: F401  (the trainer `playpen run` finds in this file)
