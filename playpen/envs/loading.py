"""Loading games for envs: benchmarks, instance rows, and which role sits in which slot."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def load_benchmark(name_or_spec: Any):
    """Load a game's ``GameBenchmark`` (call ``.close()`` when done)."""
    from playpen.clem import clemgame, preserved_logging
    from playpen.registry import game_spec
    spec = game_spec(name_or_spec) if isinstance(name_or_spec, str) else name_or_spec
    with preserved_logging():
        return clemgame().GameBenchmark.load_from_spec(spec)


def game_instance_rows(spec: Any) -> list[dict]:
    """All rows ``{"game_name", "experiment", "game_instance"}`` of the game's instances file."""
    from playpen.clem import clemgame
    return list(clemgame().GameInstances.from_game_spec(spec))


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
    from playpen.clem import clemcore
    backends = clemcore().backends
    num_slots = int(benchmark.game_spec.players)
    probes = [backends.CustomResponseModel(backends.ModelSpec(model_name=f"playpen-slot-{i}"))
              for i in range(num_slots)]
    gm = benchmark.create_game_master(row["experiment"], probes)
    gm.setup(**row["game_instance"])
    slots, own = [], []
    for player in gm.get_players():
        index = next((i for i, m in enumerate(probes) if player.model is m), None)
        if index is None:
            own.append((player.name, player.game_role))
        else:
            slots.append(PlayerSlot(index, player.name, player.game_role))
    return slots, own
