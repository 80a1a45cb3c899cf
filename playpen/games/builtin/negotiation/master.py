"""negotiation: two negotiators divide a pool of items that each values privately
(deal-or-no-deal style). See README.md for the rules and scores."""
from __future__ import annotations

import math
import re
from string import Template

from clemcore.backends import Model
from clemcore.clemgame import DialogueGameMaster, GameBenchmark, GameScorer, GameSpec, Player
from clemcore.clemgame.errors import GameError, ParseError, RuleViolationError
from clemcore.clemgame.metrics import BENCH_SCORE, METRIC_ABORTED, METRIC_LOSE, METRIC_SUCCESS

from negotiation_policy import choose_move
from negotiation_rules import (ACCEPT, PROPOSE, REJECT, best_joint, format_allocation, is_pareto_optimal,
                               parse_move, points, rest)

DEFAULT_MAX_TURNS = 8
ROLES = ("Negotiator A", "Negotiator B")
TURN_LINE = re.compile(r"^Turn (\d+) of (\d+)\.", re.MULTILINE)
OTHER_MOVE_LINE = re.compile(r"^The other negotiator's move: (.*)$", re.MULTILINE)


class Negotiator(Player):
    """Either side. The programmatic policy reads the turn and the other side's moves from
    the messages it was sent; it knows its own values (as its prompt states them)."""

    def __init__(self, model: Model, role: str, items: list[str], counts: list[int], values: list[int]):
        super().__init__(model, game_role=role)
        self.items, self.counts, self.values = list(items), list(counts), list(values)

    def _custom_response(self, context: dict) -> str:
        texts = [m["content"] for m in self.get_perspective() if m["role"] == "user"] + [context["content"]]
        turns = TURN_LINE.findall(context["content"])
        turn, max_turns = (int(turns[-1][0]), int(turns[-1][1])) if turns else (1, DEFAULT_MAX_TURNS)
        proposals, pending = [], None
        for text in texts:
            for line in OTHER_MOVE_LINE.findall(text):
                try:
                    kind, taken = parse_move(line, self.items, self.counts)
                except ParseError:
                    continue
                if kind == PROPOSE:
                    proposals.append(taken)
                pending = taken if kind == PROPOSE else None
        if not OTHER_MOVE_LINE.search(context["content"]):
            pending = None  # nothing on the table at the first turn
        return choose_move(self.items, self.counts, self.values, turn, max_turns, proposals, pending)


class NegotiationGameMaster(DialogueGameMaster):
    """Negotiator A moves first; turns alternate until a proposal is accepted (success),
    the turn limit passes without a deal (lose) or a move breaks the protocol (aborted)."""

    def __init__(self, game_spec: GameSpec, experiment: dict, player_models: list[Model]):
        super().__init__(game_spec, experiment, player_models)
        self.max_turns = int(experiment.get("max_turns", DEFAULT_MAX_TURNS))
        self.template = Template(self.load_template("resources/negotiator_prompt").strip())

    def _on_setup(self, **instance):
        self.items, self.counts = list(instance["items"]), list(instance["counts"])
        self.values = {ROLES[0]: list(instance["values_a"]), ROLES[1]: list(instance["values_b"])}
        self.turn = 1
        self.pending = None  # (proposer, counts the proposer takes)
        self.deal = None  # counts Negotiator A gets
        self.aborted_by = None
        self.moves = []
        self.a = Negotiator(self.player_models[0], ROLES[0], self.items, self.counts, self.values[ROLES[0]])
        self.b = Negotiator(self.player_models[1], ROLES[1], self.items, self.counts, self.values[ROLES[1]])
        self.add_player(self.a, initial_context=self._prompt(self.a) + "\n\n" + self._turn_text(None))
        self.add_player(self.b, initial_prompt=self._prompt(self.b))

    def _prompt(self, player: Negotiator) -> str:
        values = self.values[player.game_role]
        pool = ", ".join(f"{c} {item}" for item, c in zip(self.items, self.counts))
        worth = ", ".join(f"{item} = {v} points" for item, v in zip(self.items, values))
        example = format_allocation(self.items, [c // 2 for c in self.counts])
        return self.template.substitute(role=player.game_role, pool=pool, values=worth,
                                        total=points(values, self.counts), example=example,
                                        max_turns=self.max_turns)

    def _turn_text(self, receiver: Negotiator | None, move: str | None = None) -> str:
        text = f"Turn {self.turn} of {self.max_turns}."
        if receiver is None:
            return text + " You move first: make a proposal."
        text += f"\nThe other negotiator's move: {move}"
        if self.pending is None:
            return text + "\nNo proposal is on the table: make one."
        yours = rest(self.counts, self.pending[1])
        worth = points(self.values[receiver.game_role], yours)
        last = " This is the last turn." if self.turn == self.max_turns else ""
        return text + (f"\nIf you accept, you get {format_allocation(self.items, yours)}, worth {worth} "
                       f"points to you.{last}")

    def _other(self, player: Player) -> Negotiator:
        return self.b if player is self.a else self.a

    def _parse_response(self, player: Player, response: str):
        return parse_move(response, self.items, self.counts)

    def _advance_game(self, player: Player, parsed_response):
        kind, taken = parsed_response
        if kind in (ACCEPT, REJECT) and self.pending is None:
            raise RuleViolationError(f"{kind} with no proposal on the table", response=kind, key="no proposal")
        move = kind if taken is None else f"{PROPOSE}: {format_allocation(self.items, taken)}"
        self.moves.append([player.game_role, move])
        self.log_to_self("move", move)
        if kind == ACCEPT:
            proposer, proposed = self.pending
            self.deal = list(proposed) if proposer is self.a else list(rest(self.counts, proposed))
            self.log_to_self("deal", format_allocation(self.items, self.deal))
            self.state.succeed()
            return
        self.pending = (player, taken) if kind == PROPOSE else None
        if self.turn >= self.max_turns:
            self.log_to_self("no deal", f"turn limit ({self.max_turns}) reached")
            self.state.failed()
            return
        self.turn += 1
        other = self._other(player)
        self.set_context_for(other, self._turn_text(other, move))

    def _on_parse_error(self, error: ParseError):
        self.aborted_by = self.current_player.game_role
        self.log_to_self("invalid format", error.reason)
        self.state.abort()

    def _on_game_error(self, error: GameError):
        self.aborted_by = self.current_player.game_role
        self.log_to_self("invalid move", error.reason)
        self.state.abort()

    def _on_after_game(self):
        outcome = self.state.outcome.value
        self.log_key(METRIC_ABORTED, int(outcome == "aborted"))
        self.log_key(METRIC_SUCCESS, int(outcome == "success"))
        self.log_key(METRIC_LOSE, int(outcome == "failure"))
        self.log_key("Aborted by", self.aborted_by)
        self.log_key("Deal", self.deal)
        self.log_key("Moves", self.moves)
        self.log_key("Turns", len(self.moves))


class NegotiationScorer(GameScorer):
    """Main Score: the deal's joint points as a share of the best possible joint points
    (every item with whoever values it more), × 100; 0 without a deal; NaN when aborted."""

    def compute_episode_scores(self, interactions: dict):
        counts = self.game_instance["counts"]
        values_a, values_b = self.game_instance["values_a"], self.game_instance["values_b"]
        deal = interactions.get("Deal")
        self.log_episode_score("Turns", interactions.get("Turns", 0))
        for role in ROLES:
            self.log_episode_score(f"Aborted by {role}", int(interactions.get("Aborted by") == role))
        if interactions[METRIC_ABORTED]:
            for key in (BENCH_SCORE, "Negotiator A Points", "Negotiator B Points", "Pareto Optimal"):
                self.log_episode_score(key, math.nan)
            return
        if deal is None:
            for key in (BENCH_SCORE, "Negotiator A Points", "Negotiator B Points", "Pareto Optimal"):
                self.log_episode_score(key, 0)
            return
        a, b = points(values_a, deal), points(values_b, rest(counts, deal))
        self.log_episode_score("Negotiator A Points", a)
        self.log_episode_score("Negotiator B Points", b)
        self.log_episode_score("Pareto Optimal", int(is_pareto_optimal(counts, values_a, values_b, deal)))
        self.log_episode_score(BENCH_SCORE, 100 * (a + b) / best_joint(counts, values_a, values_b))


class NegotiationBenchmark(GameBenchmark):

    def create_game_master(self, experiment: dict, player_models: list[Model]) -> DialogueGameMaster:
        return NegotiationGameMaster(self.game_spec, experiment, player_models)

    def create_game_scorer(self, experiment: dict, game_instance: dict) -> GameScorer:
        return NegotiationScorer(self.game_name, experiment, game_instance)
