"""The game folder of arith_proposer and arith_solver (clemgame.json holds both specs); clemcore
loads this file for either. It defines exactly one GameBenchmark subclass, which hands out
the game master and scorer of the spec's game_name. The games live in arith_masters.py,
the arithmetic in arith_rules.py. See README.md."""
from clemcore.backends import Model
from clemcore.clemgame import DialogueGameMaster, GameBenchmark, GameScorer, GameSpec

from arith_masters import ProposerGameMaster, ProposerScorer, SolverGameMaster, SolverScorer

GAMES: dict[str, tuple[type[DialogueGameMaster], type[GameScorer]]] = {
    "arith_proposer": (ProposerGameMaster, ProposerScorer),
    "arith_solver": (SolverGameMaster, SolverScorer),
}
"""game_name of a spec in clemgame.json -> (its game master class, its scorer class)"""


class ProposerSolverBenchmark(GameBenchmark):
    """The benchmark of either game spec of this folder, chosen by the spec's game_name."""

    def __init__(self, game_spec: GameSpec):
        if game_spec.game_name not in GAMES:
            raise ValueError(f"unknown game '{game_spec.game_name}' in the proposer_solver folder; "
                             f"expected one of {', '.join(GAMES)}")
        super().__init__(game_spec)
        self.game_master_class, self.game_scorer_class = GAMES[game_spec.game_name]

    def create_game_master(self, experiment: dict, player_models: list[Model]) -> DialogueGameMaster:
        return self.game_master_class(self.game_spec, experiment, player_models)

    def create_game_scorer(self, experiment: dict, game_instance: dict) -> GameScorer:
        return self.game_scorer_class(self.game_name, experiment, game_instance)
