"""A league with LoRA: a main agent, a main exploiter and a league exploiter on one model.

    playpen run examples/trl/league_trainer_lora.py -l smol-135m -T 1.0 -L 40 --games adversarial_taboo --epochs 4
    playpen run examples/trl/league_trainer_lora.py -l smol-135m -T 1.0 --main-weights self:0.2,past:0.6,exploiters:0.2

Every player is a LoRA adapter of ONE copy of the learner's model. Each epoch new players
enter and only they train; every older player stays as a frozen member of the league:

- ``main-e``: a copy of ``main-(e-1)`` (the first: ``--init-adapter`` or fresh). Its
  seatings are dealt by ``--main-weights`` among itself, the frozen players (prioritised:
  those that beat the main agents more often come more often) and the exploiters;
- ``mx-e`` (from epoch 1), the main exploiter: plays only the current main agent;
- ``lx-e`` (from epoch 2), the league exploiter: plays the frozen players, drawn by
  ``--exploiter-opponents``.

Exploiters start afresh each epoch (``--reset-exploiters``, the default) or continue
from the previous one (``--no-reset-exploiters``). Each seating plays
``--instances-per-match`` training instances ``--num-generations`` times, both seat orders
alternating; all adapter players' turns of a step are answered in one batched generate.
Training: GRPO's clipped objective on each entrant's own turns and rewards.

Outputs in ``<models-dir>/league+lora/<learner>/``: ``population/``, ``records/epoch-N/``,
``matches.jsonl``, ``metrics.jsonl``, ``ratings.json``, ``ratings.png`` (Elo over epochs) and
``checkpoint-E`` per epoch: Ctrl-C stops it (exit 130), ``--resume`` goes on after the last
complete epoch (docs/populations.md).

The same trainer by name: ``playpen run league ...`` (``playpen run --list``). Its code, to
read top to bottom: ``playpen/population/leagues.py``. A trainer file of your own imports it (or
subclasses it) as this one does.
"""

from playpen.population.leagues import League  # noqa: F401  (the trainer `playpen run` finds in this file)
