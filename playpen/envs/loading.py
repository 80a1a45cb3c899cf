"""Loading games for envs: benchmarks, instance rows, and which role sits in which slot."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Optional

from playpen.clem import clemcore, clemgame, preserved_logging
from playpen.errors import GameLoadError, TrainingSetupError
from playpen.registry import TRAIN_INSTANCES, game_spec


def load_benchmark(name_or_spec: Any):
    """Load a game's ``GameBenchmark`` (call ``.close()`` when done). A game whose code fails
    to load (a missing dependency, an incompatible clemcore) raises :class:`GameLoadError`."""
    spec = game_spec(name_or_spec) if isinstance(name_or_spec, str) else name_or_spec
    cg = clemgame()
    with preserved_logging():
        try:
            return cg.GameBenchmark.load_from_spec(spec)
        except Exception as e:  # the game's own code: name the game and the cause
            raise GameLoadError(f"game '{spec.game_name}' could not be loaded from {spec.game_path}: "
                                f"{cause(e)}") from e


def cause(error: BaseException) -> str:
    """``Type: message`` of an exception, on one line."""
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def game_instance_rows(spec: Any, items: Optional[Iterable[str]] = None) -> list[dict]:
    """The rows ``{"game_name", "experiment", "game_instance"}`` of the game's instances file:
    all of them, or those whose ``<experiment>/<game_id>`` is one of `items` (a named split,
    :mod:`playpen.evaluation.splits`: what a trainer's ``--split`` selects)."""
    cg = clemgame()
    try:
        rows = list(cg.GameInstances.from_game_spec(spec))
    except Exception as e:  # a malformed instances file
        raise GameLoadError(f"game '{spec.game_name}': cannot read in/{getattr(spec, 'instances', 'instances')}"
                            f".json: {cause(e)}") from e
    if items is None:
        return rows
    wanted = set(items)
    return [r for r in rows if f"{r['experiment']['name']}/{r['game_instance']['game_id']}" in wanted]


@dataclass(frozen=True)
class PlayerSlot:
    """Player ``index`` of ``player_models``: becomes ``player_name`` playing ``role``."""

    index: int
    player_name: str
    role: str


def probe_roles(benchmark: Any, row: dict) -> tuple[list[PlayerSlot], list[tuple[str, str]]]:
    """Which role each ``player_models`` slot plays, found by setting up one instance
    with a distinct programmatic model per slot.

    Returns the slots and the (player_name, role) of players the game creates itself
    (e.g. a programmatic evaluator not counted in ``players``).
    """
    backends = clemcore().backends
    num_slots = int(benchmark.game_spec.players)
    probes = [backends.CustomResponseModel(backends.ModelSpec(model_name=f"playpen-slot-{i}"))
              for i in range(num_slots)]
    try:
        gm = benchmark.create_game_master(row["experiment"], probes)
        gm.setup(**row["game_instance"])
    except Exception as e:  # the game's own code
        spec = benchmark.game_spec
        raise GameLoadError(f"game '{spec.game_name}' could not be set up (instance "
                            f"{row['experiment']['name']}/{row['game_instance']['game_id']} of "
                            f"in/{getattr(spec, 'instances', 'instances')}.json): {cause(e)}") from e
    slots, own = [], []
    for player in gm.get_players():
        index = next((i for i, m in enumerate(probes) if player.model is m), None)
        if index is None:
            own.append((player.name, player.game_role))
        else:
            slots.append(PlayerSlot(index, player.name, player.game_role))
    return slots, own


def load_seated(game: str, instances: Optional[str] = TRAIN_INSTANCES, items: Optional[Iterable[str]] = None
                ) -> tuple[Any, list[dict], list[PlayerSlot]]:
    """A game's loaded benchmark (the caller closes it), the rows of its ``instances`` file
    (None: the game's own, held-out set; `items`: only those) and its player slots, probed on
    the first row."""
    spec = game_spec(game, instances)  # names a missing instances file clearly
    benchmark = load_benchmark(spec)
    try:
        rows = game_instance_rows(spec, items)
        if not rows:
            raise TrainingSetupError(f"game '{game}' has no instances in in/{instances or 'instances'}.json")
        slots, _ = probe_roles(benchmark, rows[0])
    except BaseException:
        benchmark.close()
        raise
    return benchmark, rows, slots


def game_roles(game: str, instances: Optional[str] = TRAIN_INSTANCES, items: Optional[Iterable[str]] = None
               ) -> tuple[list[str], list[dict]]:
    """The roles of a game's player slots (player names where roles repeat) and the rows of
    its ``instances`` file (None: the game's own, held-out set; `items`: only those)."""
    benchmark, rows, slots = load_seated(game, instances, items)
    benchmark.close()
    names = [s.role for s in slots]
    if len(set(names)) < len(names):
        names = [s.player_name for s in slots]
    return names, rows
