"""adversarial_taboo (SPAG): the Attacker knows a secret word and tries to make the
Defender say it; the Defender may declare its guess instead. Outcomes are recorded
from the Attacker's perspective, plus per-role keys. See README.md.

The game master, scorer and players of the game spec "adversarial_taboo"; master.py
hands them to clemcore."""
import math
from string import Template

from clemcore.backends import Model
from clemcore.clemgame import DialogueGameMaster, GameScorer, GameSpec, GameState, Player
from clemcore.clemgame.errors import ParseError
from clemcore.clemgame.master import Outcome
from clemcore.clemgame.metrics import BENCH_SCORE, METRIC_ABORTED

from adv_taboo_policies import attacker_message, defender_message
from taboo_lexicon import Lexicon, default_lexicon
from taboo_rules import ATTACK_PREFIX, DEFEND_PREFIX, DefenderMove, is_correct_declaration, mentions, \
    outcome_keys, parse_defender_message, parse_prefixed, received_messages

DEFAULT_MAX_ROUNDS = 5
ATTACKER, DEFENDER = "Attacker", "Defender"
MAIN_SCORE_BY_WINNER = {ATTACKER: 100, None: 50, DEFENDER: 0}  # None: a tie


class AdversarialTabooState(GameState):
    """GameState plus who won (`winner`: "Attacker", "Defender" or None for a tie or
    a running game) and who broke the format (`aborted_by`), for role-aware rewards."""

    def __init__(self):
        super().__init__()
        self.winner: str | None = None
        self.aborted_by: str | None = None


class Attacker(Player):
    """Player 1: knows the target; its programmatic policy hints from the instance's
    related words and clue sentences."""

    def __init__(self, model: Model, target: str, related: list[str], clues: list[str], lexicon: Lexicon):
        super().__init__(model, game_role=ATTACKER)
        self.target = target
        self.related = list(related)
        self.clues = list(clues)
        self.lexicon = lexicon

    def _custom_response(self, context: dict) -> str:
        own = [message["content"] for message in self.get_perspective() if message["role"] == "assistant"]
        return attacker_message(self.lexicon, self.target, self.related, self.clues, own)


class Defender(Player):
    """Player 2: does not know the target; its programmatic policy ranks the lexicon
    against what the Attacker said."""

    def __init__(self, model: Model, lexicon: Lexicon, max_rounds: int):
        super().__init__(model, game_role=DEFENDER)
        self.lexicon = lexicon
        self.max_rounds = max_rounds

    def _custom_response(self, context: dict) -> str:
        perspective = self.get_perspective()
        round_number = 1 + sum(1 for message in perspective if message["role"] == "assistant")
        return defender_message(self.lexicon, received_messages(perspective, context), round_number,
                                self.max_rounds)


class AdversarialTabooGameMaster(DialogueGameMaster):
    """One round = one Attacker message + one Defender message; `max_rounds` rounds."""

    def __init__(self, game_spec: GameSpec, experiment: dict, player_models: list[Model]):
        super().__init__(game_spec, experiment, player_models)
        self.max_rounds = int(experiment.get("max_rounds", DEFAULT_MAX_ROUNDS))

    def _on_setup(self, **instance):
        self.state = AdversarialTabooState()
        self.target = instance["target_word"]
        self.rounds_played = 0
        self.end_reason = None
        lexicon = default_lexicon()
        self.attacker = Attacker(self.player_models[0], self.target, instance.get("related_words", []),
                                 instance.get("clues", []), lexicon)
        self.defender = Defender(self.player_models[1], lexicon, self.max_rounds)
        self.add_player(self.attacker, initial_context=self._prompt("attacker_prompt"))
        self.add_player(self.defender, initial_prompt=self._prompt("defender_prompt"))

    def _prompt(self, name: str) -> str:
        template = Template(self.load_template(f"resources/{name}"))
        return template.substitute(target=self.target, max_rounds=self.max_rounds).strip()

    def _parse_response(self, player: Player, response: str) -> str | DefenderMove:
        if player is self.attacker:
            return parse_prefixed(response, ATTACK_PREFIX)
        return parse_defender_message(parse_prefixed(response, DEFEND_PREFIX))

    def _advance_game(self, player: Player, parsed_response: str | DefenderMove):
        if player is self.attacker:
            if mentions(parsed_response, self.target):
                self._end(DEFENDER, "attacker said the target")
                return
            self.log_to_self("valid attack", parsed_response)
            self.set_context_for(self.defender, f"{ATTACK_PREFIX} {parsed_response}")
            return
        self.rounds_played += 1
        if parsed_response.is_declaration:
            self.log_to_self("declaration", parsed_response.declared)
            if is_correct_declaration(parsed_response.declared, self.target):
                self._end(DEFENDER, "correct declaration")
            else:
                self._end(ATTACKER, "wrong declaration")
        elif mentions(parsed_response.text, self.target):
            self._end(ATTACKER, "defender said the target")
        elif self.rounds_played >= self.max_rounds:
            self._end(None, "max rounds reached")
        else:
            self.log_to_self("valid defense", parsed_response.text)
            self.set_context_for(self.attacker, f"{DEFEND_PREFIX} {parsed_response.text}")

    def _end(self, winner: str | None, reason: str):
        self.log_to_self(reason, self.target)
        self.end_reason = reason
        self.state.winner = winner
        if winner == ATTACKER:
            self.state.succeed()
        else:  # a Defender win or a tie: the Attacker missed its goal
            self.state.failed()

    def _on_parse_error(self, error: ParseError):
        role = self.current_player.game_role
        self.log_to_self("invalid format", f"{role}: {error.reason}")
        self.end_reason = f"invalid format ({role})"
        self.state.aborted_by = role
        self.state.abort()

    def _on_after_game(self):
        played = self.state.outcome is not Outcome.ABORTED
        for key, value in outcome_keys(self.state.outcome).items():
            self.log_key(key, value)
        self.log_key("Attacker Win", int(played and self.state.winner == ATTACKER))
        self.log_key("Defender Win", int(played and self.state.winner == DEFENDER))
        self.log_key("Tie", int(played and self.state.winner is None))
        self.log_key("Aborted By", self.state.aborted_by)
        self.log_key("Target Word", self.target)
        self.log_key("Rounds Played", self.rounds_played)
        self.log_key("End Reason", self.end_reason)


class AdversarialTabooScorer(GameScorer):
    """Main Score (Attacker's view): 100 Attacker win, 50 tie, 0 Defender win, NaN aborted."""

    def compute_round_score(self, round_idx, round_events: list[dict]) -> None:
        event_types = {event["action"]["type"] for event in round_events}
        self.log_round_score(round_idx, "Declaration", int("declaration" in event_types))

    def compute_episode_scores(self, interactions: dict):
        aborted = bool(interactions[METRIC_ABORTED])
        for key in ("Attacker Win", "Defender Win", "Tie"):
            self.log_episode_score(key, math.nan if aborted else interactions[key])
        self.log_episode_score("Attacker Aborted", int(interactions["Aborted By"] == ATTACKER))
        self.log_episode_score("Defender Aborted", int(interactions["Aborted By"] == DEFENDER))
        self.log_episode_score("Rounds Played", interactions["Rounds Played"])
        if aborted:
            main_score = math.nan
        elif interactions["Attacker Win"]:
            main_score = MAIN_SCORE_BY_WINNER[ATTACKER]
        elif interactions["Defender Win"]:
            main_score = MAIN_SCORE_BY_WINNER[DEFENDER]
        else:
            main_score = MAIN_SCORE_BY_WINNER[None]
        self.log_episode_score(BENCH_SCORE, main_score)

