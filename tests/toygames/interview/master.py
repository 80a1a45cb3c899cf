"""interview (toy): clemgame.json declares 2 players, but the master builds only ONE
model-backed player (the Answerer, from ``player_models[0]``); the Questioner is a
programmatic player the game builds itself with its own model. ``player_models[1]`` is never
used. Like third-party games with a built-in questioner or a missing clue giver. See ../README.md."""
import math

from clemcore.backends import CustomResponseModel, Model, ModelSpec
from clemcore.clemgame import DialogueGameMaster, GameBenchmark, GameScorer, GameSpec, Player
from clemcore.clemgame.errors import ParseError
from clemcore.clemgame.metrics import BENCH_SCORE, METRIC_ABORTED, METRIC_LOSE, METRIC_SUCCESS


class Questioner(Player):
    def __init__(self, question: str):
        super().__init__(CustomResponseModel(ModelSpec(model_name="programmatic")), game_role="Questioner")
        self.question = question

    def _custom_response(self, context: dict) -> str:
        return f"QUESTION: {self.question}"


class Answerer(Player):
    def __init__(self, model: Model, answer: str):
        super().__init__(model, game_role="Answerer")
        self.answer = answer

    def _custom_response(self, context: dict) -> str:
        return f"ANSWER: {self.answer}"


class InterviewMaster(DialogueGameMaster):
    def _on_setup(self, **instance):
        self.answer = instance["answer"].lower()
        self.questioner = Questioner(instance["question"])
        self.answerer = Answerer(self.player_models[0], self.answer)
        self.add_player(self.questioner, initial_context="Ask your question.")
        self.add_player(self.answerer, initial_prompt="Answer the question in one line: ANSWER: <answer>")

    def _parse_response(self, player: Player, response: str) -> str:
        prefix = "QUESTION:" if player is self.questioner else "ANSWER:"
        text = response.strip()
        if not text.upper().startswith(prefix):
            raise ParseError(f"reply must start with {prefix}", response=response)
        return text[len(prefix):].strip()

    def _on_parse_error(self, error: ParseError):
        self.state.abort()

    def _advance_game(self, player: Player, parsed_response: str):
        if player is self.questioner:
            self.set_context_for(self.answerer, parsed_response)
        elif parsed_response.lower().strip(" .") == self.answer:
            self.state.succeed()
        else:
            self.state.failed()

    def _on_after_game(self):
        outcome = self.state.outcome.value
        self.log_key(METRIC_ABORTED, int(outcome == "aborted"))
        self.log_key(METRIC_SUCCESS, int(outcome == "success"))
        self.log_key(METRIC_LOSE, int(outcome == "failure"))


class InterviewScorer(GameScorer):
    def compute_round_score(self, round_idx, round_events):
        pass

    def compute_episode_scores(self, interactions: dict):
        if interactions[METRIC_ABORTED]:
            self.log_episode_score(BENCH_SCORE, math.nan)
        else:
            self.log_episode_score(BENCH_SCORE, 100 if interactions[METRIC_SUCCESS] else 0)


class InterviewBenchmark(GameBenchmark):
    def create_game_master(self, experiment: dict, player_models: list[Model]):
        return InterviewMaster(self.game_spec, experiment, player_models)

    def create_game_scorer(self, experiment: dict, game_instance: dict):
        return InterviewScorer(self.game_name, experiment, game_instance)
