"""sayword (toy, trivially learnable): reply with the given word. Success = the reply,
lowercased and stripped of spaces and punctuation, is the word. Never aborts."""
import string

from clemcore.backends import Model
from clemcore.clemgame import DialogueGameMaster, GameBenchmark, GameScorer, GameSpec, Player
from clemcore.clemgame.metrics import BENCH_SCORE, METRIC_ABORTED, METRIC_LOSE, METRIC_SUCCESS

PROMPT = "Reply with the single word: {word}"


class WordSayer(Player):
    def __init__(self, model: Model, word: str):
        super().__init__(model, game_role="WordSayer")
        self.word = word

    def _custom_response(self, context: dict) -> str:
        return self.word


def normalize(text: str) -> str:
    return text.strip().strip(string.punctuation + string.whitespace).lower()


class SaywordMaster(DialogueGameMaster):
    def _on_setup(self, **instance):
        self.word = instance["word"]
        self.add_player(WordSayer(self.player_models[0], self.word), initial_context=PROMPT.format(word=self.word))

    def _parse_response(self, player: Player, response: str) -> str:
        return normalize(response)

    def _advance_game(self, player: Player, parsed_response: str):
        if parsed_response == self.word:
            self.state.succeed()
        else:
            self.state.failed()

    def _on_after_game(self):
        self.log_key(METRIC_ABORTED, 0)
        self.log_key(METRIC_SUCCESS, int(self.state.outcome.value == "success"))
        self.log_key(METRIC_LOSE, int(self.state.outcome.value != "success"))


class SaywordScorer(GameScorer):
    def compute_round_score(self, round_idx, round_events):
        pass

    def compute_episode_scores(self, interactions: dict):
        self.log_episode_score(BENCH_SCORE, 100 if interactions[METRIC_SUCCESS] else 0)


class SaywordBenchmark(GameBenchmark):
    def create_game_master(self, experiment: dict, player_models: list[Model]):
        return SaywordMaster(self.game_spec, experiment, player_models)

    def create_game_scorer(self, experiment: dict, game_instance: dict):
        return SaywordScorer(self.game_name, experiment, game_instance)
