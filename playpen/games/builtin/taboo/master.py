"""The game folder of taboo and adversarial_taboo (SPAG): clemgame.json holds both game
specs, and clemcore loads this file for either of them. It must define exactly one
GameBenchmark subclass, which hands out the game master and scorer of the spec's
game_name. The games live in taboo_master.py and adv_taboo_master.py; they share the
text rules (taboo_rules.py), the lexicon (taboo_lexicon.py), the word data and the
instance generator. See README.md."""
from clemcore.backends import Model
from clemcore.clemgame import DialogueGameMaster, GameBenchmark, GameScorer, GameSpec

from adv_taboo_master import AdversarialTabooGameMaster, AdversarialTabooScorer
from taboo_master import TabooGameMaster, TabooScorer

GAMES: dict[str, tuple[type[DialogueGameMaster], type[GameScorer]]] = {
    "taboo": (TabooGameMaster, TabooScorer),
    "adversarial_taboo": (AdversarialTabooGameMaster, AdversarialTabooScorer),
}
"""game_name of a spec in clemgame.json -> (its game master class, its scorer class)"""


class TabooGamesBenchmark(GameBenchmark):
    """The benchmark of either game spec of this folder, chosen by the spec's game_name."""

    def __init__(self, game_spec: GameSpec):
        if game_spec.game_name not in GAMES:
            raise ValueError(f"unknown game '{game_spec.game_name}' in the taboo folder; "
                             f"expected one of {', '.join(GAMES)}")
        super().__init__(game_spec)
        self.game_master_class, self.game_scorer_class = GAMES[game_spec.game_name]

    def create_game_master(self, experiment: dict, player_models: list[Model]) -> DialogueGameMaster:
        return self.game_master_class(self.game_spec, experiment, player_models)

    def create_game_scorer(self, experiment: dict, game_instance: dict) -> GameScorer:
        return self.game_scorer_class(self.game_name, experiment, game_instance)
