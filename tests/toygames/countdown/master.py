"""countdown (toy, LEGACY master + scorer API like the official clembench games): guess a
number from 1 to 5 with higher/lower hints, replying `NUMBER: <n>`. See ../README.md."""
import math

from clemcore.backends import Model
from clemcore.clemgame import GameBenchmark, GameSpec, Player
from clemcore.clemgame.legacy.master import DialogueGameMaster
from clemcore.clemgame.legacy.scorer import GameScorer
from clemcore.clemgame.metrics import BENCH_SCORE, METRIC_ABORTED, METRIC_LOSE, METRIC_SUCCESS, \
    METRIC_REQUEST_COUNT, METRIC_REQUEST_COUNT_PARSED, METRIC_REQUEST_COUNT_VIOLATED

PROMPT = "I am thinking of a number from 1 to 5. Reply with exactly one line: NUMBER: <n>"


class NumberGuesser(Player):
    def __init__(self, model: Model):
        super().__init__(model, game_role="NumberGuesser")
        self.low, self.high, self.last = 1, 5, None

    def _custom_response(self, context: dict) -> str:
        # binary search on the hints
        if "higher" in context["content"]:
            self.low = self.last + 1
        elif "lower" in context["content"]:
            self.high = self.last - 1
        self.last = (self.low + self.high) // 2
        return f"NUMBER: {self.last}"


class CountdownMaster(DialogueGameMaster):
    def __init__(self, game_spec: GameSpec, experiment: dict, player_models: list[Model]):
        super().__init__(game_spec, experiment, player_models)
        self.max_attempts = int(experiment["max_attempts"])

    def _on_setup(self, **instance):
        self.target = int(instance["target"])
        self.guesser = NumberGuesser(self.player_models[0])
        self.add_player(self.guesser, initial_context=PROMPT)
        self.attempts = 0
        self.aborted = self.success = False
        self.requests = self.parsed = self.violated = 0

    def _does_game_proceed(self) -> bool:
        return not (self.aborted or self.success or self.attempts >= self.max_attempts)

    def _validate_player_response(self, player: Player, response: str) -> bool:
        self.requests += 1
        text = response.strip()
        if not text.upper().startswith("NUMBER:") or not text[7:].strip().isdigit():
            self.violated += 1
            self.aborted = True
            self.log_to_self("invalid format", text)
            return False
        self.parsed += 1
        return True

    def _parse_response(self, player: Player, response: str) -> str:
        return response.strip()[7:].strip()

    def _on_valid_player_response(self, player: Player, parsed_response: str):
        self.attempts += 1
        guess = int(parsed_response)
        if guess == self.target:
            self.success = True
            self.log_to_self("correct guess", guess)
        elif self.attempts < self.max_attempts:
            hint = "higher" if guess < self.target else "lower"
            self.log_to_self("hint", hint)
            self.set_context_for(player, f"No, it is {hint}. NUMBER: <n>")

    def _on_after_game(self):
        self.log_key(METRIC_ABORTED, self.aborted)
        self.log_key(METRIC_LOSE, not self.aborted and not self.success)
        self.log_key(METRIC_SUCCESS, self.success)
        self.log_key(METRIC_REQUEST_COUNT, self.requests)
        self.log_key(METRIC_REQUEST_COUNT_PARSED, self.parsed)
        self.log_key(METRIC_REQUEST_COUNT_VIOLATED, self.violated)
        self.log_key("attempts", self.attempts)


class CountdownScorer(GameScorer):
    def score_turns(self, interactions: dict) -> None:
        for index, _ in enumerate(interactions["turns"]):
            self.log_turn_score(index, "played", 1)

    def log_main_score(self, interactions: dict):
        if interactions[METRIC_ABORTED]:
            self.log_episode_score(BENCH_SCORE, math.nan)
        elif interactions[METRIC_SUCCESS]:
            self.log_episode_score(BENCH_SCORE, 100 / interactions["attempts"])
        else:
            self.log_episode_score(BENCH_SCORE, 0)


class CountdownBenchmark(GameBenchmark):
    def create_game_master(self, experiment: dict, player_models: list[Model]):
        return CountdownMaster(self.game_spec, experiment, player_models)

    def create_game_scorer(self, experiment: dict, game_instance: dict):
        return CountdownScorer(self.game_name, experiment, game_instance)
