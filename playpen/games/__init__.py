"""playpen's own clembench-style games, one folder each (clemcore game API).

Each folder is a self-contained clemcore game: ``clemgame.json``, ``master.py``,
``in/instances.json`` (held-out evaluation set, the default for ``clem run``),
``in/instances_train.json`` (training set), ``resources/`` and
``instancegenerator.py``. This package only exists so that the folders ship with
the wheel; clemcore imports each ``master.py`` as a top-level module.
"""
from pathlib import Path

GAMES_DIR = Path(__file__).resolve().parent
