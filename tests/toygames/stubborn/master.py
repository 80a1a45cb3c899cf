"""stubborn (toy): 1 player, the Mover, must reply ``MOVE: <1|2|3>``. A reply in any other
format is asked again, with no limit: the round ends only on a valid move, so a model that
never finds the format plays forever (clembench has games of this shape). The programmatic
Mover moves at random (``random.choice``), so its outcomes vary with the seed. Success =
the move hits the instance's target; else Lose. Main Score 100 or 0. See ../README.md."""
import random

from clemcore.backends import Model
from clemcore.clemgame import DialogueGameMaster, GameBenchmark, GameScorer, Player
from clemcore.clemgame.errors import ParseError
from clemcore.clemgame.metrics import BENCH_SCORE, METRIC_ABORTED, METRIC_LOSE, METRIC_SUCCESS

PROMPT = "Pick a number from 1 to 3. Reply with one line: MOVE: <number>"


class Mover(Player):
    def __init__(self, model: Model):
        super().__init__(model, game_role="Mover")

    def _custom_response(self, context: dict) -> str:
        return f"MOVE: {random.choice([1, 2, 3])}"


class StubbornMaster(DialogueGameMaster):
    def _on_setup(self, **instance):
        self.target = int(instance["target"])
        self.mover = Mover(self.player_models[0])
        self.add_player(self.mover, initial_context=PROMPT)

    def _parse_response(self, player: Player, response: str) -> int:
        text = response.strip()
        if not text.upper().startswith("MOVE:") or text[5:].strip() not in ("1", "2", "3"):
            raise ParseError("expected MOVE: <1|2|3>", response=response)
        return int(text[5:].strip())

    def _on_parse_error(self, error: ParseError):
        self.set_context_for(self.mover, "Invalid format. " + PROMPT)  # asked again, never aborted

    def _advance_game(self, player: Player, parsed_response: int):
        if parsed_response == self.target:
            self.state.succeed()
        else:
            self.state.failed()

    def _on_after_game(self):
        outcome = self.state.outcome.value
        self.log_key(METRIC_ABORTED, int(outcome == "aborted"))
        self.log_key(METRIC_SUCCESS, int(outcome == "success"))
        self.log_key(METRIC_LOSE, int(outcome == "failure"))


class StubbornScorer(GameScorer):
    def compute_round_score(self, round_idx, round_events):
        pass

    def compute_episode_scores(self, interactions: dict):
        if interactions[METRIC_ABORTED]:
            self.log_episode_score(BENCH_SCORE, float("nan"))
        else:
            self.log_episode_score(BENCH_SCORE, 100 if interactions[METRIC_SUCCESS] else 0)


class StubbornBenchmark(GameBenchmark):
    def create_game_master(self, experiment: dict, player_models: list[Model]):
        return StubbornMaster(self.game_spec, experiment, player_models)

    def create_game_scorer(self, experiment: dict, game_instance: dict):
        return StubbornScorer(self.game_name, experiment, game_instance)
