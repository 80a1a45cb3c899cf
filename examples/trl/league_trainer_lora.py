"""The packaged trainer `league` (a league with LoRA: main agent, main exploiter, league exploiter)
as a file: `playpen run examples/trl/league_trainer_lora.py -l MODEL` is `playpen run league -l
MODEL`.

Its documentation (what it trains, example commands, outputs) is the docstring of League in
playpen/population/leagues.py; `playpen run league --help` shows it with the options. A trainer
file of your own imports (or subclasses) it as this one does.
"""

from playpen.population.leagues import League  # noqa: F401  (the trainer `playpen run` finds in this file)
