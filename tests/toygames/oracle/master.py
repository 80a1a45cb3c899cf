"""oracle (toy): clemgame.json declares 1 player, the Oracle (from ``player_models[0]``),
but every TURN is taken by a programmatic Asker the game builds itself. The master asks the
Oracle each question INSIDE the Asker's step (``oracle(question, memorize=False)``): the
model player speaks only in side calls, like clembench's privateshared answering its probes.
Main Score = 100 * right answers / questions; never aborts. See ../README.md."""
from clemcore.backends import CustomResponseModel, Model, ModelSpec
from clemcore.clemgame import DialogueGameMaster, GameBenchmark, GameScorer, Player
from clemcore.clemgame.metrics import BENCH_SCORE, METRIC_ABORTED, METRIC_LOSE, METRIC_SUCCESS


class Asker(Player):
    def __init__(self):
        super().__init__(CustomResponseModel(ModelSpec(model_name="programmatic")), game_role="Asker")

    def _custom_response(self, context: dict) -> str:
        return "NEXT"


class Oracle(Player):
    def __init__(self, model: Model, answers: dict):
        super().__init__(model, game_role="Oracle")
        self.answers = answers

    def _custom_response(self, context: dict) -> str:
        return self.answers[context["content"].split("\n")[0]]


class OracleMaster(DialogueGameMaster):
    def _on_setup(self, **instance):
        self.questions = [tuple(q) for q in instance["questions"]]
        self.index, self.right = 0, 0
        self.asker = Asker()
        self.oracle = Oracle(self.player_models[0], dict(self.questions))
        self.add_player(self.asker, initial_context="Say NEXT for the next question.")
        self.add_player(self.oracle)

    def _parse_response(self, player: Player, response: str) -> str:
        return response  # the Asker's turns carry nothing; the Oracle never takes one

    def _should_pass_turn(self):
        return False  # the Asker keeps every turn; the Oracle is only called inside steps

    def _advance_game(self, player: Player, parsed_response: str):
        question, answer = self.questions[self.index]
        reply = self.oracle({"role": "user", "content": f"{question}\nReply yes or no."}, memorize=False)
        self.right += int(reply.strip().lower().startswith(answer))
        self.log_to_self("answer", {"question": question, "reply": reply})
        self.index += 1
        if self.index == len(self.questions):
            if self.right == len(self.questions):
                self.state.succeed()
            else:
                self.state.failed()
        else:
            self.set_context_for(self.asker, "Say NEXT for the next question.")

    def _on_after_game(self):
        outcome = self.state.outcome.value
        self.log_key(METRIC_ABORTED, int(outcome == "aborted"))
        self.log_key(METRIC_SUCCESS, int(outcome == "success"))
        self.log_key(METRIC_LOSE, int(outcome == "failure"))
        self.log_key("right", self.right)
        self.log_key("num_questions", len(self.questions))


class OracleScorer(GameScorer):
    def compute_round_score(self, round_idx, round_events):
        pass

    def compute_episode_scores(self, interactions: dict):
        self.log_episode_score(BENCH_SCORE, 100 * interactions["right"] / interactions["num_questions"])


class OracleBenchmark(GameBenchmark):
    def create_game_master(self, experiment: dict, player_models: list[Model]):
        return OracleMaster(self.game_spec, experiment, player_models)

    def create_game_scorer(self, experiment: dict, game_instance: dict):
        return OracleScorer(self.game_name, experiment, game_instance)
