"""The two games of the proposer-solver folder: arith_proposer (the Proposer writes a problem;
a panel of reference solvers decides its score) and arith_solver (the Solver computes one
problem). Game masters, scorers and players; master.py hands them to clemcore. See README.md."""
import math
from string import Template

from clemcore.backends import Model
from clemcore.clemgame import DialogueGameMaster, GameScorer, GameSpec, Player
from clemcore.clemgame.errors import GameError, ParseError
from clemcore.clemgame.metrics import BENCH_SCORE, METRIC_ABORTED, METRIC_LOSE, METRIC_SUCCESS

from arith_rules import ANSWER_PREFIX, PROBLEM_PREFIX, best_problem, check_problem, evaluate, panel_solve_rate, \
    parse_answer, parse_expression, parse_problem, problem_in, proposer_score, render

DEFAULT_PANEL = [1, 2, 3, 4]
DEFAULT_MAX_OPERATORS = 4


def _outcome_keys(master, success: bool, aborted: bool) -> None:
    master.log_key(METRIC_ABORTED, int(aborted))
    master.log_key(METRIC_SUCCESS, int(success and not aborted))
    master.log_key(METRIC_LOSE, int(not success and not aborted))


class Proposer(Player):
    """Its programmatic policy proposes the problem that suits the panel best."""

    def __init__(self, model: Model, numbers: list[int], max_operators: int, panel: list[int]):
        super().__init__(model, game_role="Proposer")
        self.numbers, self.max_operators, self.panel = list(numbers), max_operators, list(panel)

    def _custom_response(self, context: dict) -> str:
        return f"{PROBLEM_PREFIX} {best_problem(self.numbers, self.max_operators, self.panel)}"


class Solver(Player):
    """Its programmatic policy computes the problem exactly."""

    def __init__(self, model: Model):
        super().__init__(model, game_role="Solver")

    def _custom_response(self, context: dict) -> str:
        return f"{ANSWER_PREFIX} {evaluate(parse_expression(problem_in(context['content'])))}"


class _OneTurnMaster(DialogueGameMaster):
    """A game of one reply: parse it, judge it, end."""

    def _prompt(self, name: str, **values) -> str:
        return Template(self.load_template(f"resources/{name}")).substitute(**values).strip()

    def _on_parse_error(self, error: ParseError):
        self.log_to_self("invalid format", error.reason)
        self.end_reason = "invalid format"
        self.state.abort()

    def _on_game_error(self, error: GameError):
        self.log_to_self("rule violation", error.reason)
        self.end_reason = "rule violation"
        self.state.failed()


class ProposerGameMaster(_OneTurnMaster):
    """The Proposer writes one problem from the instance's numbers; the experiment's panel
    of reference solvers (``panel_skills``) computes it."""

    def __init__(self, game_spec: GameSpec, experiment: dict, player_models: list[Model]):
        super().__init__(game_spec, experiment, player_models)
        self.panel = [int(s) for s in experiment.get("panel_skills", DEFAULT_PANEL)]
        self.max_operators = int(experiment.get("max_operators", DEFAULT_MAX_OPERATORS))

    def _on_setup(self, **instance):
        self.numbers = [int(n) for n in instance["numbers"]]
        self.problem, self.value, self.difficulty, self.solve_rate = None, None, None, None
        self.end_reason = None
        self.proposer = Proposer(self.player_models[0], self.numbers, self.max_operators, self.panel)
        self.add_player(self.proposer, initial_context=self._prompt(
            "proposer_prompt", numbers=", ".join(str(n) for n in self.numbers), max_operators=self.max_operators))

    def _parse_response(self, player: Player, response: str) -> str:
        return parse_problem(response)

    def _advance_game(self, player: Player, parsed_response: str):
        self.problem = parsed_response
        self.value, self.difficulty = check_problem(parsed_response, self.numbers, self.max_operators)
        self.solve_rate = panel_solve_rate(parsed_response, self.panel)
        self.log_to_self("valid problem", f"{parsed_response} = {self.value}")
        self.log_to_self("panel solve rate", self.solve_rate)
        self.end_reason = "problem scored"
        if 0.0 < self.solve_rate < 1.0:
            self.state.succeed()
        else:
            self.state.failed()

    def _on_after_game(self):
        aborted = self.end_reason in (None, "invalid format")
        _outcome_keys(self, success=self.solve_rate is not None and 0.0 < self.solve_rate < 1.0, aborted=aborted)
        self.log_key("Problem", self.problem)
        self.log_key("Answer", self.value)
        self.log_key("Difficulty", self.difficulty)
        self.log_key("Panel Solve Rate", self.solve_rate)
        self.log_key("End Reason", self.end_reason)


class ProposerScorer(GameScorer):
    """Main Score: 100 * (1 - |2 * panel solve rate - 1|); 0 for a rule violation; NaN when aborted."""

    def compute_episode_scores(self, interactions: dict):
        rate = interactions.get("Panel Solve Rate")
        if interactions[METRIC_ABORTED]:
            main_score = math.nan
        elif rate is None:
            main_score = 0.0
        else:
            main_score = proposer_score(rate)
        self.log_episode_score("Panel Solve Rate", math.nan if rate is None else rate)
        self.log_episode_score("Difficulty", math.nan if interactions.get("Difficulty") is None
                               else interactions["Difficulty"])
        self.log_episode_score(BENCH_SCORE, main_score)


class SolverGameMaster(_OneTurnMaster):
    """The Solver computes the instance's ``problem`` (its value is computed here, never trusted)."""

    def _on_setup(self, **instance):
        self.problem = render(parse_expression(instance["problem"]))
        self.value = evaluate(parse_expression(self.problem))
        self.given = None
        self.end_reason = None
        self.solver = Solver(self.player_models[0])
        self.add_player(self.solver, initial_context=self._prompt("solver_prompt", problem=self.problem))

    def _parse_response(self, player: Player, response: str) -> int:
        return parse_answer(response)

    def _advance_game(self, player: Player, parsed_response: int):
        self.given = parsed_response
        if parsed_response == self.value:
            self.log_to_self("correct answer", parsed_response)
            self.end_reason = "correct answer"
            self.state.succeed()
        else:
            self.log_to_self("wrong answer", parsed_response)
            self.end_reason = "wrong answer"
            self.state.failed()

    def _on_after_game(self):
        _outcome_keys(self, success=self.end_reason == "correct answer",
                      aborted=self.end_reason in (None, "invalid format"))
        self.log_key("Problem", self.problem)
        self.log_key("Answer", self.value)
        self.log_key("Given Answer", self.given)
        self.log_key("End Reason", self.end_reason)


class SolverScorer(GameScorer):
    """Main Score: 100 for the right value, 0 for a wrong one, NaN when aborted."""

    def compute_episode_scores(self, interactions: dict):
        if interactions[METRIC_ABORTED]:
            main_score = math.nan
        else:
            main_score = 100.0 * interactions[METRIC_SUCCESS]
        self.log_episode_score(BENCH_SCORE, main_score)
