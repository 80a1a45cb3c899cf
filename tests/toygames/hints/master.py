"""hints (toy): two game specs share this folder and master. ``hints`` names a secret word
from its category (``in/instances.json``); ``hints_withclue`` from a clue, and its spec names
its own instances file (``in/instances_withclue.json``). Played on the other spec's file, a
variant fails at setup (its instances lack the field it needs). See ../README.md."""
import math

from clemcore.backends import Model
from clemcore.clemgame import DialogueGameMaster, GameBenchmark, GameScorer, GameSpec, Player
from clemcore.clemgame.errors import ParseError
from clemcore.clemgame.metrics import BENCH_SCORE, METRIC_ABORTED, METRIC_LOSE, METRIC_SUCCESS


class Namer(Player):
    def __init__(self, model: Model, word: str):
        super().__init__(model, game_role="Namer")
        self.word = word

    def _custom_response(self, context: dict) -> str:
        return f"WORD: {self.word}"


class HintsMaster(DialogueGameMaster):
    def _on_setup(self, **instance):
        self.word = instance["word"]
        if self.game_spec.game_name == "hints_withclue":
            hint = f"Clue: {instance['clue']}"
        else:
            hint = f"Category: {instance['category']}"
        self.add_player(Namer(self.player_models[0], self.word),
                        initial_context=f"Name the secret word. {hint}. Reply with one line: WORD: <word>")

    def _parse_response(self, player: Player, response: str) -> str:
        text = response.strip()
        if not text.upper().startswith("WORD:"):
            raise ParseError("reply must start with WORD:", response=response)
        return text[5:].strip().lower()

    def _on_parse_error(self, error: ParseError):
        self.state.abort()

    def _advance_game(self, player: Player, parsed_response: str):
        if parsed_response == self.word:
            self.state.succeed()
        else:
            self.state.failed()

    def _on_after_game(self):
        outcome = self.state.outcome.value
        self.log_key(METRIC_ABORTED, int(outcome == "aborted"))
        self.log_key(METRIC_SUCCESS, int(outcome == "success"))
        self.log_key(METRIC_LOSE, int(outcome == "failure"))


class HintsScorer(GameScorer):
    def compute_round_score(self, round_idx, round_events):
        pass

    def compute_episode_scores(self, interactions: dict):
        if interactions[METRIC_ABORTED]:
            self.log_episode_score(BENCH_SCORE, math.nan)
        else:
            self.log_episode_score(BENCH_SCORE, 100 if interactions[METRIC_SUCCESS] else 0)


class HintsBenchmark(GameBenchmark):
    def create_game_master(self, experiment: dict, player_models: list[Model]):
        return HintsMaster(self.game_spec, experiment, player_models)

    def create_game_scorer(self, experiment: dict, game_instance: dict):
        return HintsScorer(self.game_name, experiment, game_instance)
