"""debate: two debaters defend opposite answers to a question with a checkable numeric
answer; a judge decides. See README.md for the rules and scores."""
from __future__ import annotations

import math
from string import Template

from clemcore.backends import Model
from clemcore.clemgame import DialogueGameMaster, GameBenchmark, GameScorer, GameSpec, Player
from clemcore.clemgame.errors import ParseError
from clemcore.clemgame.metrics import BENCH_SCORE, METRIC_ABORTED, METRIC_LOSE, METRIC_SUCCESS

from debate_policy import debater_reply, judge_reply
from debate_rules import MAX_CHECKS, format_number, parse_turn, parse_verdict, same_number

DEFAULT_ROUNDS = 2
SIDES = ("A", "B")


class Debater(Player):
    """Defends one answer. The programmatic policy knows how to work the question out
    (the instance's solution) and reads the other side's last turn from its message."""

    def __init__(self, model: Model, side: str, answer: float, solution: str):
        super().__init__(model, game_role=f"Debater {side}")
        self.side, self.answer, self.solution = side, answer, solution

    def _custom_response(self, context: dict) -> str:
        text = context["content"]
        marker = f"Debater {'B' if self.side == 'A' else 'A'} said:\n"
        opponent = text.rpartition(marker)[2].partition("\n\nYour turn")[0] if marker in text else None
        return debater_reply(self.answer, self.solution, opponent)


class Judge(Player):
    """Reads the whole debate once; the programmatic judge verifies the stated checks."""

    def __init__(self, model: Model):
        super().__init__(model, game_role="Judge")

    def _custom_response(self, context: dict) -> str:
        return judge_reply(context["content"])


class DebateGameMaster(DialogueGameMaster):
    """Rounds of Debater A then Debater B, then the judge's verdict. A debater whose ANSWER
    is not its own concedes (the debate ends); a reply in the wrong format aborts."""

    def __init__(self, game_spec: GameSpec, experiment: dict, player_models: list[Model]):
        super().__init__(game_spec, experiment, player_models)
        self.rounds = int(experiment.get("rounds", DEFAULT_ROUNDS))
        self.debater_template = Template(self.load_template("resources/debater_prompt").strip())
        self.judge_template = Template(self.load_template("resources/judge_prompt").strip())

    def _on_setup(self, **instance):
        self.question, self.facts = instance["question"], instance["facts"]
        self.correct = float(instance["answer"])
        self.answers = {"A": float(instance["answer_a"]), "B": float(instance["answer_b"])}
        self.correct_side = next(s for s in SIDES if same_number(self.answers[s], self.correct))
        self.transcript: list[tuple[str, int, str]] = []  # (side, round, reply)
        self.checks = {s: {"verified": 0, "false": 0} for s in SIDES}
        self.winner = self.decided_by = self.verdict = self.aborted_by = None
        self.position = 0
        self.last_reply = ""
        self.a = Debater(self.player_models[0], "A", self.answers["A"], instance["solution"])
        self.b = Debater(self.player_models[1], "B", self.answers["B"], instance["solution"])
        self.judge = Judge(self.player_models[2])
        self.schedule = [self.a, self.b] * self.rounds + [self.judge]
        self.add_player(self.a, initial_context=self._prompt(self.a) + f"\n\nRound 1 of {self.rounds}. "
                                                                       f"You speak first: make your case.")
        self.add_player(self.b, initial_prompt=self._prompt(self.b))
        self.add_player(self.judge)

    def _prompt(self, debater: Debater) -> str:
        other = "B" if debater.side == "A" else "A"
        return self.debater_template.substitute(
            role=debater.game_role, question=self.question, facts=self.facts, rounds=self.rounds,
            own=format_number(debater.answer), other=format_number(self.answers[other]),
            other_role=f"Debater {other}", max_checks=MAX_CHECKS)

    def _next_player(self) -> Player:
        self.position = min(self.position + 1, len(self.schedule) - 1)
        return self.schedule[self.position]

    def _start_next_round(self) -> bool:
        return self.current_player is self.a or self.current_player is self.judge

    def _parse_response(self, player: Player, response: str):
        self.last_reply = response.strip() if isinstance(response, str) else ""
        return parse_verdict(response) if player is self.judge else parse_turn(response)

    def _advance_game(self, player: Player, parsed_response):
        if player is self.judge:
            self.verdict = parsed_response
            self.log_to_self("verdict", f"Debater {parsed_response}")
            return self._decide(parsed_response, "judge")
        turn, side = parsed_response, player.side
        round_number = self.position // 2 + 1
        for check in turn.checks:
            self.checks[side]["verified" if check.holds() else "false"] += 1
        if not same_number(turn.answer, player.answer):
            self.log_to_self("concession", f"Debater {side} answered {format_number(turn.answer)}")
            return self._decide("B" if side == "A" else "A", "concession")
        self.transcript.append((side, round_number, self.last_reply))
        self.log_to_self("turn", f"Debater {side}, round {round_number}: {len(turn.checks)} checks")
        upcoming = self.schedule[self.position + 1]
        if upcoming is self.judge:
            self.set_context_for(self.judge, self._judge_prompt())
        else:
            next_round = (self.position + 1) // 2 + 1
            self.set_context_for(upcoming, f"Round {next_round} of {self.rounds}. Debater {side} said:\n"
                                           f"{self.last_reply}\n\nYour turn.")

    def _judge_prompt(self) -> str:
        transcript = "\n".join(f"=== Debater {side}, round {number} ===\n{reply}"
                               for side, number, reply in self.transcript)
        return self.judge_template.substitute(
            question=self.question, facts=self.facts, answer_a=format_number(self.answers["A"]),
            answer_b=format_number(self.answers["B"]), transcript=transcript)

    def _decide(self, winner: str, decided_by: str):
        self.winner, self.decided_by = winner, decided_by
        self.log_to_self("winner", f"Debater {winner} ({decided_by})")
        if winner == self.correct_side:
            self.state.succeed()
        else:
            self.state.failed()

    def _on_parse_error(self, error: ParseError):
        self.aborted_by = self.current_player.game_role
        self.log_to_self("invalid format", error.reason)
        self.state.abort()

    def _on_after_game(self):
        outcome = self.state.outcome.value
        self.log_key(METRIC_ABORTED, int(outcome == "aborted"))
        self.log_key(METRIC_SUCCESS, int(outcome == "success"))
        self.log_key(METRIC_LOSE, int(outcome == "failure"))
        self.log_key("Aborted by", self.aborted_by)
        self.log_key("Winner", self.winner)
        self.log_key("Decided by", self.decided_by)
        self.log_key("Correct Side", self.correct_side)
        self.log_key("Checks", self.checks)


class DebateScorer(GameScorer):
    """Main Score: 100 when the side defending the correct answer wins, 0 when the other
    side wins, NaN when aborted. Per debater: `Debater A Wins`, `Debater B Wins`."""

    def compute_episode_scores(self, interactions: dict):
        aborted = bool(interactions[METRIC_ABORTED])
        for role in ("Debater A", "Debater B", "Judge"):
            self.log_episode_score(f"Aborted by {role}", int(interactions.get("Aborted by") == role))
        checks = interactions.get("Checks") or {}
        for side in SIDES:
            self.log_episode_score(f"Verified Checks {side}", checks.get(side, {}).get("verified", 0))
            self.log_episode_score(f"False Checks {side}", checks.get(side, {}).get("false", 0))
        winner = interactions.get("Winner")
        for side in SIDES:
            self.log_episode_score(f"Debater {side} Wins", math.nan if aborted else int(winner == side))
        judged = not aborted and interactions.get("Decided by") == "judge"
        self.log_episode_score("Judge Correct", int(winner == interactions["Correct Side"]) if judged else math.nan)
        self.log_episode_score("Conceded", math.nan if aborted else int(interactions.get("Decided by") == "concession"))
        self.log_episode_score(BENCH_SCORE, math.nan if aborted else 100 * int(interactions[METRIC_SUCCESS]))


class DebateBenchmark(GameBenchmark):

    def create_game_master(self, experiment: dict, player_models: list[Model]) -> DialogueGameMaster:
        return DebateGameMaster(self.game_spec, experiment, player_models)

    def create_game_scorer(self, experiment: dict, game_instance: dict) -> GameScorer:
        return DebateScorer(self.game_name, experiment, game_instance)
