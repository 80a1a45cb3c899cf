"""The packaged trainer `fsp` (fictitious self-play with LoRA against frozen snapshots of past
epochs) as a file: `playpen run examples/trl/fsp_trainer_lora.py -l MODEL` is `playpen run fsp
-l MODEL`.

Its documentation (what it trains, example commands, outputs) is the docstring of
FictitiousSelfPlay in playpen/population/leagues.py; `playpen run fsp --help` shows it with the
options. A trainer file of your own imports (or subclasses) it as this one does.
"""

from playpen.population.leagues import FictitiousSelfPlay  # noqa: F401  (the trainer `playpen run` finds in this file)
