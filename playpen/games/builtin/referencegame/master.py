"""referencegame: the Instruction Giver describes a target grid, the Instruction
Follower picks it out of three (one round). See README.md for rules and scores."""
from __future__ import annotations

import math
import string

from clemcore.backends import Model
from clemcore.clemgame import (DialogueGameMaster, GameBenchmark, GameScorer, GameSpec, ParseError,
                               Player)
from clemcore.clemgame.metrics import (BENCH_SCORE, METRIC_ABORTED, METRIC_LOSE, METRIC_SUCCESS)

from refgame_grids import read_grid_after
from refgame_language import describe, render_expression, resolve
from refgame_rules import POSITION_WORDS, parse_answer, parse_expression

GIVER_GRID_LABELS = ("Target grid:", "Distractor grid 1:", "Distractor grid 2:")
FOLLOWER_GRID_LABELS = ("First grid:", "Second grid:", "Third grid:")


class InstructionGiver(Player):
    """Sees the target and two distractors; replies `Expression: ...`."""

    def __init__(self, model: Model):
        super().__init__(model, game_role="Instruction Giver")

    def _custom_response(self, context: dict) -> str:
        # Read the grids off the prompt text (never off the instance) so the policy
        # sees exactly what a language model would see.
        text = context["content"]
        grids = [read_grid_after(text, label) for label in GIVER_GRID_LABELS]
        if any(grid is None for grid in grids):
            return "Expression: The grid that differs from the other two."
        target, *distractors = grids
        return "Expression: " + render_expression(describe(target, distractors))


class InstructionFollower(Player):
    """Sees three unlabelled grids and the expression; replies `Answer: <position>`."""

    def __init__(self, model: Model):
        super().__init__(model, game_role="Instruction Follower")

    def _custom_response(self, context: dict) -> str:
        text = context["content"]
        grids = [read_grid_after(text, label) for label in FOLLOWER_GRID_LABELS]
        expression = _last_expression_line(text)
        position = 1
        if all(grid is not None for grid in grids) and expression is not None:
            index = resolve(expression, grids)
            position = 1 if index is None else index + 1
        return f"Answer: {POSITION_WORDS[position]}"


def _last_expression_line(text: str) -> str | None:
    lines = [line for line in text.splitlines() if line.lower().startswith("expression:")]
    return lines[-1].partition(":")[2] if lines else None


class ReferenceGameMaster(DialogueGameMaster):
    """One round: giver → expression → follower → answer → Success / Lose; a reply in
    the wrong format aborts the episode."""

    def __init__(self, game_spec: GameSpec, experiment: dict, player_models: list[Model]):
        super().__init__(game_spec, experiment, player_models)
        self.giver_template = string.Template(self.load_template("resources/giver_prompt").strip())
        self.follower_template = string.Template(self.load_template("resources/follower_prompt").strip())

    def _on_setup(self, **instance):
        self.follower_grids = instance["follower_grids"]
        self.target_position = int(instance["target_position"])
        self.expression = None
        self.answer = None
        self.aborted_by = None
        self.giver = InstructionGiver(self.player_models[0])
        self.follower = InstructionFollower(self.player_models[1])
        giver_prompt = self.giver_template.substitute(
            TARGET_GRID=instance["target_grid"],
            DISTRACTOR_GRID_1=instance["distractor_grids"][0],
            DISTRACTOR_GRID_2=instance["distractor_grids"][1])
        self.add_player(self.giver, initial_context=giver_prompt)
        self.add_player(self.follower)

    def _parse_response(self, player: Player, response: str):
        if player is self.giver:
            return parse_expression(response)
        return parse_answer(response)

    def _advance_game(self, player: Player, parsed_response):
        if player is self.giver:
            self.expression = parsed_response
            self.log_to_self("parse", f"Expression: {parsed_response}")
            grids = self.follower_grids
            self.set_context_for(self.follower, self.follower_template.substitute(
                GRID_1=grids[0], GRID_2=grids[1], GRID_3=grids[2], EXPRESSION=parsed_response))
            return
        self.answer = parsed_response
        if parsed_response == self.target_position:
            self.log_to_self("parse_correct", f"Answer: {POSITION_WORDS[parsed_response]}")
            self.state.succeed()
        else:
            self.log_to_self("parse_wrong", f"Answer: {POSITION_WORDS[parsed_response]}")
            self.state.failed()

    def _on_parse_error(self, error: ParseError):
        self.aborted_by = self.current_player.name
        self.log_to_self("invalid format", error.reason)
        self.state.abort()

    def _on_after_game(self):
        outcome = self.state.outcome.value
        self.log_key(METRIC_ABORTED, int(outcome == "aborted"))
        self.log_key(METRIC_SUCCESS, int(outcome == "success"))
        self.log_key(METRIC_LOSE, int(outcome == "failure"))
        self.log_key("Aborted at Player 1", int(self.aborted_by == self.giver.name))
        self.log_key("Aborted at Player 2", int(self.aborted_by == self.follower.name))
        self.log_key("expression", self.expression)
        self.log_key("answer", self.answer)
        self.log_key("target_position", self.target_position)


class ReferenceGameScorer(GameScorer):

    def compute_round_score(self, round_idx, round_events: list[dict]) -> None:
        for event in round_events:
            if event["action"]["type"] == "parse":
                expression = event["action"]["content"].partition(":")[2].strip()
                self.log_round_score(round_idx, "Generated Expression Length", len(expression))
                self.log_round_score(round_idx, "Generated Expression Number of Tokens",
                                     len(expression.split()))

    def compute_episode_scores(self, interactions: dict):
        aborted = bool(interactions[METRIC_ABORTED])
        self.log_episode_score("Aborted at Player 1", interactions.get("Aborted at Player 1", 0))
        self.log_episode_score("Aborted at Player 2", interactions.get("Aborted at Player 2", 0))
        expression = interactions.get("expression")
        if aborted or expression is None:
            self.log_episode_score("Generated Expression Length", math.nan)
            self.log_episode_score("Generated Expression Number of Tokens", math.nan)
        else:
            self.log_episode_score("Generated Expression Length", len(expression))
            self.log_episode_score("Generated Expression Number of Tokens", len(expression.split()))
        if aborted:
            self.log_episode_score(BENCH_SCORE, math.nan)
        else:
            self.log_episode_score(BENCH_SCORE, 100 * int(interactions[METRIC_SUCCESS]))


class ReferenceGameBenchmark(GameBenchmark):

    def create_game_master(self, experiment: dict, player_models: list[Model]) -> DialogueGameMaster:
        return ReferenceGameMaster(self.game_spec, experiment, player_models)

    def create_game_scorer(self, experiment: dict, game_instance: dict) -> GameScorer:
        return ReferenceGameScorer(self.game_name, experiment, game_instance)

    @staticmethod
    def augment_instance(game_instance: dict, rng) -> dict:
        """playpen's rollout augmentation (training only): the follower's three grids in a
        fresh random order, the target position moved with its grid, so that a position
        label fixed in advance carries no information. Scores follow the new position."""
        grids = list(game_instance["follower_grids"])
        order = list(range(len(grids)))
        rng.shuffle(order)  # new position i shows old grid order[i]
        return {**game_instance, "follower_grids": [grids[i] for i in order],
                "target_position": order.index(int(game_instance["target_position"]) - 1) + 1}
