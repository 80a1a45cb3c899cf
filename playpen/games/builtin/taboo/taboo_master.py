"""taboo: the Describer clues a secret word without saying it or its taboo words; the
Guesser has three tries to name it. See README.md for the rules and scores.

The game master, scorer and players of the game spec "taboo"; master.py hands them to
clemcore."""
import math
from string import Template

from clemcore.backends import Model
from clemcore.clemgame import DialogueGameMaster, GameScorer, GameSpec, Player
from clemcore.clemgame.errors import GameError, ParseError, RuleViolationError
from clemcore.clemgame.metrics import BENCH_SCORE, METRIC_ABORTED, METRIC_SUCCESS

from taboo_lexicon import Lexicon, default_lexicon
from taboo_policies import choose_guess, clue_text, compose_clue, previous_guess
from taboo_rules import CLUE_PREFIX, GUESS_PREFIX, is_correct_guess, normalize_guess, outcome_keys, \
    parse_prefixed, received_messages, taboo_violations

DEFAULT_MAX_ROUNDS = 3


class Describer(Player):
    """Player 1. Its programmatic policy reads its clue sentences from the instance."""

    def __init__(self, model: Model, target: str, related: list[str], clues: list[str]):
        super().__init__(model, game_role="Describer")
        self.target = target
        self.related = list(related)
        self.clues = list(clues)

    def _custom_response(self, context: dict) -> str:
        num_given = sum(1 for message in self.get_perspective() if message["role"] == "assistant")
        return f"{CLUE_PREFIX} {compose_clue(self.target, self.related, self.clues, num_given)}"


class Guesser(Player):
    """Player 2. Its programmatic policy matches the clues against a lexicon; it never
    sees the target."""

    def __init__(self, model: Model, lexicon: Lexicon):
        super().__init__(model, game_role="Guesser")
        self.lexicon = lexicon

    def _custom_response(self, context: dict) -> str:
        perspective = self.get_perspective()
        guesses = [previous_guess(message["content"]) for message in perspective
                   if message["role"] == "assistant"]
        clues = [clue_text(message) for message in received_messages(perspective, context)]
        return f"{GUESS_PREFIX} {choose_guess(self.lexicon, clues, guesses)}"


class TabooGameMaster(DialogueGameMaster):
    """One round = one clue + one guess; up to `max_rounds` rounds (experiment key)."""

    def __init__(self, game_spec: GameSpec, experiment: dict, player_models: list[Model]):
        super().__init__(game_spec, experiment, player_models)
        self.max_rounds = int(experiment.get("max_rounds", DEFAULT_MAX_ROUNDS))

    def _on_setup(self, **instance):
        self.target = instance["target_word"]
        self.related = list(instance["related_words"])
        self.num_guesses = 0
        self.solved_at_round = None
        self.end_reason = None
        self.describer = Describer(self.player_models[0], self.target, self.related, instance.get("clues", []))
        # an experiment may thin the programmatic guesser's knowledge (a held-out listener)
        self.guesser = Guesser(self.player_models[1],
                               default_lexicon(float(self.experiment.get("guesser_cue_share", 1.0))))
        self.add_player(self.describer, initial_context=self._prompt("describer_prompt"))
        self.add_player(self.guesser, initial_prompt=self._prompt("guesser_prompt"))

    def _prompt(self, name: str) -> str:
        template = Template(self.load_template(f"resources/{name}"))
        return template.substitute(target=self.target, related=", ".join(self.related),
                                   max_rounds=self.max_rounds).strip()

    def _parse_response(self, player: Player, response: str) -> str:
        return parse_prefixed(response, CLUE_PREFIX if player is self.describer else GUESS_PREFIX)

    def _advance_game(self, player: Player, parsed_response: str):
        if player is self.describer:
            violations = taboo_violations(parsed_response, self.target, self.related)
            if violations:
                raise RuleViolationError(f"the clue uses taboo words: {', '.join(violations)}",
                                         response=parsed_response, key="invalid clue")
            self.log_to_self("valid clue", parsed_response)
            self.set_context_for(self.guesser, f"{CLUE_PREFIX} {parsed_response}")
            return
        self.num_guesses += 1
        self.log_to_self("valid guess", normalize_guess(parsed_response))
        if is_correct_guess(parsed_response, self.target):
            self.log_to_self("correct guess", self.target)
            self.solved_at_round = self.num_guesses
            self.end_reason = "correct guess"
            self.state.succeed()
        elif self.num_guesses >= self.max_rounds:
            self.log_to_self("max rounds reached", self.num_guesses)
            self.end_reason = "max rounds reached"
            self.state.failed()
        else:
            self.log_to_self("wrong guess", normalize_guess(parsed_response))
            self.set_context_for(self.describer, f"{GUESS_PREFIX} {parsed_response}")

    def _on_parse_error(self, error: ParseError):
        self.log_to_self("invalid format", error.reason)
        self.end_reason = "invalid format"
        self.state.abort()

    def _on_game_error(self, error: GameError):
        self.log_to_self("invalid clue", error.reason)
        self.end_reason = "invalid clue"
        self.state.failed()

    def _on_after_game(self):
        for key, value in outcome_keys(self.state.outcome).items():
            self.log_key(key, value)
        self.log_key("Target Word", self.target)
        self.log_key("Guesses", self.num_guesses)
        self.log_key("Solved At Round", self.solved_at_round)
        self.log_key("End Reason", self.end_reason)


class TabooScorer(GameScorer):
    """Main Score: 100 / rounds needed on success, 0 on a loss, NaN when aborted."""

    def compute_round_score(self, round_idx, round_events: list[dict]) -> None:
        event_types = {event["action"]["type"] for event in round_events}
        self.log_round_score(round_idx, "Correct Guess", int("correct guess" in event_types))
        self.log_round_score(round_idx, "Invalid Clue", int("invalid clue" in event_types))

    def compute_episode_scores(self, interactions: dict):
        if interactions[METRIC_ABORTED]:
            main_score = math.nan
        elif interactions[METRIC_SUCCESS]:
            main_score = 100 / interactions["Solved At Round"]
        else:
            main_score = 0
        self.log_episode_score("Guesses", interactions["Guesses"])
        self.log_episode_score(BENCH_SCORE, main_score)

