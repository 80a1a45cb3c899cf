"""playpen's own clembench-style games, one folder each (clemcore game API).

Each folder under ``builtin/`` is a self-contained clemcore game: ``clemgame.json``, ``master.py``,
``in/instances.json`` (held-out evaluation set, the default for ``clem run``),
``in/instances_train.json`` (training set), ``resources/`` and
``instancegenerator.py``. This package only exists so that the folders ship with
the wheel; clemcore imports each ``master.py`` as a top-level module.
"""
from pathlib import Path

GAMES_DIR = Path(__file__).resolve().parent

# Why builtin/ one level down: clemcore scans the working directory to depth 3 for game
# folders. From a source checkout, playpen/games/<game> would be found by that scan AND
# by game_registry.json's benchmark_path, listing every game twice (and running it twice
# under a benchmark selector). At depth 4 only the registry entry finds them.
