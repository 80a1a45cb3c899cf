"""imagegame: the Instruction Giver describes a 5x5 letter grid command by command;
the Instruction Follower redraws the whole grid after each command. See README.md."""
from __future__ import annotations

import math
import string

from clemcore.backends import Model
from clemcore.clemgame import (DialogueGameMaster, GameBenchmark, GameScorer, GameSpec, ParseError,
                               Player)
from clemcore.clemgame.metrics import BENCH_SCORE, METRIC_ABORTED, METRIC_LOSE, METRIC_SUCCESS

from imagegame_commands import apply_command, plan_commands
from imagegame_grids import (EMPTY_GRID, SIZE, changed_cells, format_grid, grid_scores, main_score,
                             parse_grid, read_grid)
from imagegame_rules import DONE, parse_command

DEFAULT_MAX_ROUNDS = 25
SUCCESS_F1 = 99.0
TARGET_LABEL = "your grid:"
NEXT_COMMAND_PROMPT = "What is your next command?"


class InstructionGiver(Player):
    """Sees the target grid; replies one `Command: ...` per turn, then `Command: DONE`."""

    def __init__(self, model: Model):
        super().__init__(model, game_role="Instruction Giver")

    def _custom_response(self, context: dict) -> str:
        # The target is read off the first prompt and the step off the player's own
        # history, so the policy sees only what a language model would see.
        history = self.get_perspective()
        texts = [m["content"] for m in history if m["role"] == "user"] + [context["content"]]
        target = next((grid for grid in map(_grid_after_label, texts) if grid is not None), None)
        if target is None:
            return f"Command: {DONE}"
        given = sum(1 for m in history if m["role"] == "assistant")
        plan = plan_commands(target)
        return f"Command: {plan[given]}" if given < len(plan) else f"Command: {DONE}"


class InstructionFollower(Player):
    """Applies each command to its grid and replies with the whole grid."""

    def __init__(self, model: Model):
        super().__init__(model, game_role="Instruction Follower")

    def _custom_response(self, context: dict) -> str:
        grid = EMPTY_GRID
        replies = [m["content"] for m in self.get_perspective() if m["role"] == "assistant"]
        if replies:
            try:
                grid = parse_grid(replies[-1])
            except ParseError:
                pass  # keep drawing on an empty grid
        commands = [line for line in context["content"].splitlines() if line.lower().startswith("command:")]
        if commands:
            grid = apply_command(grid, commands[-1].partition(":")[2])
        return format_grid(grid)


def _grid_after_label(text: str):
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip().lower() == TARGET_LABEL:
            rows = [row for row in lines[i + 1:] if row.strip()][:SIZE]
            try:
                return parse_grid("\n".join(rows))
            except ParseError:
                return None
    return None


class ImageGameMaster(DialogueGameMaster):
    """Rounds of command → grid until the giver says DONE or the round limit is
    reached; then the drawn grid is compared with the target. A reply in the wrong
    format aborts the episode."""

    def __init__(self, game_spec: GameSpec, experiment: dict, player_models: list[Model]):
        super().__init__(game_spec, experiment, player_models)
        self.max_rounds = int(experiment.get("max_rounds", DEFAULT_MAX_ROUNDS))
        self.giver_template = string.Template(self.load_template("resources/giver_prompt").strip())
        self.follower_prompt = self.load_template("resources/follower_prompt").strip()

    def _on_setup(self, **instance):
        self.target_grid = read_grid(instance["target_grid"])
        self.drawn_grid = EMPTY_GRID
        self.aborted_by = None
        self.giver = InstructionGiver(self.player_models[0])
        self.follower = InstructionFollower(self.player_models[1])
        self.add_player(self.giver, initial_context=self.giver_template.substitute(
            TARGET_GRID=format_grid(self.target_grid), MAX_ROUNDS=self.max_rounds))
        self.add_player(self.follower, initial_prompt=self.follower_prompt)

    def _parse_response(self, player: Player, response: str):
        if player is self.giver:
            return parse_command(response)
        return parse_grid(response)

    def _advance_game(self, player: Player, parsed_response):
        if player is self.giver:
            self.log_to_self("parse", f"Command: {parsed_response}")
            if parsed_response == DONE:
                self._finish()
            else:
                self.set_context_for(self.follower, f"Command: {parsed_response}")
            return
        changed = changed_cells(self.drawn_grid, parsed_response)
        self.drawn_grid = parsed_response
        self.log_to_self("grid", {"grid": format_grid(parsed_response), "changed_cells": changed})
        if self.current_round + 1 >= self.max_rounds:
            self.log_to_self("round limit", f"{self.max_rounds} rounds played")
            self._finish()
        else:
            self.set_context_for(self.giver, NEXT_COMMAND_PROMPT)

    def _finish(self):
        precision, recall, f1 = grid_scores(self.drawn_grid, self.target_grid)
        self.log_to_self("evaluation", {"precision": precision, "recall": recall, "f1": f1})
        if f1 >= SUCCESS_F1:
            self.state.succeed()
        else:
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
        self.log_key("target_grid", format_grid(self.target_grid))
        self.log_key("drawn_grid", format_grid(self.drawn_grid))


class ImageGameScorer(GameScorer):

    def __init__(self, name: str, experiment: dict, game_instance: dict):
        super().__init__(name, experiment, game_instance)
        self.target_grid = read_grid(game_instance["target_grid"])
        self.command_lengths = []
        self.changed_counts = []

    def compute_round_score(self, round_idx, round_events: list[dict]) -> None:
        for event in round_events:
            action = event["action"]
            if action["type"] == "parse" and action["content"] != f"Command: {DONE}":
                command = action["content"].partition(":")[2].strip()
                self.command_lengths.append(len(command))
                self.log_round_score(round_idx, "Generated Instruction Length", len(command))
            elif action["type"] == "grid":
                precision, recall, f1 = grid_scores(read_grid(action["content"]["grid"]), self.target_grid)
                self.changed_counts.append(action["content"]["changed_cells"])
                self.log_round_score(round_idx, "Precision", precision)
                self.log_round_score(round_idx, "Recall", recall)
                self.log_round_score(round_idx, "F1", f1)
                self.log_round_score(round_idx, "Changed Cell Count", action["content"]["changed_cells"])

    def compute_episode_scores(self, interactions: dict):
        self.log_episode_score("Aborted at Player 1", interactions.get("Aborted at Player 1", 0))
        self.log_episode_score("Aborted at Player 2", interactions.get("Aborted at Player 2", 0))
        if interactions[METRIC_ABORTED]:
            for name in ("Precision", "Recall", "F1", "Average Changed Cell Count",
                         "Average Generated Instruction Length", BENCH_SCORE):
                self.log_episode_score(name, math.nan)
            return
        precision, recall, f1 = grid_scores(read_grid(interactions["drawn_grid"]), self.target_grid)
        self.log_episode_score("Precision", precision)
        self.log_episode_score("Recall", recall)
        self.log_episode_score("F1", f1)
        self.log_episode_score("Average Changed Cell Count", _mean(self.changed_counts))
        self.log_episode_score("Average Generated Instruction Length", _mean(self.command_lengths))
        self.log_episode_score(BENCH_SCORE, main_score(f1))


def _mean(values: list) -> float:
    return sum(values) / len(values) if values else math.nan


class ImageGameBenchmark(GameBenchmark):

    def create_game_master(self, experiment: dict, player_models: list[Model]) -> DialogueGameMaster:
        return ImageGameMaster(self.game_spec, experiment, player_models)

    def create_game_scorer(self, experiment: dict, game_instance: dict) -> GameScorer:
        return ImageGameScorer(self.game_name, experiment, game_instance)
