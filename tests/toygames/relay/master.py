"""relay (toy, new DialogueGameMaster API): the Speaker says `WORD: <word>`, the Listener
answers `GUESS: <word>`. See ../README.md."""
import math

from clemcore.backends import Model
from clemcore.clemgame import DialogueGameMaster, GameBenchmark, GameScorer, GameSpec, Player
from clemcore.clemgame.errors import ParseError
from clemcore.clemgame.metrics import BENCH_SCORE, METRIC_ABORTED, METRIC_LOSE, METRIC_SUCCESS

SPEAKER_PROMPT = ("You are the Speaker. Tell your partner the secret word '{word}'. "
                  "Reply with exactly one line: WORD: <the word>")
LISTENER_PROMPT = ("You are the Listener. Your partner tells you a word. "
                   "Reply with exactly one line: GUESS: <the word>")


class Speaker(Player):
    def __init__(self, model: Model, word: str):
        super().__init__(model, game_role="Speaker")
        self.word = word

    def _custom_response(self, context: dict) -> str:
        return f"WORD: {self.word}"


class Listener(Player):
    def __init__(self, model: Model):
        super().__init__(model, game_role="Listener")

    def _custom_response(self, context: dict) -> str:
        # the context must already be in memory (clemcore perceives before answering)
        assert self.get_perspective() and self.get_perspective()[-1]["content"] == context["content"]
        for line in context["content"].splitlines():
            if line.strip().upper().startswith("WORD:"):
                return f"GUESS: {line.split(':', 1)[1].strip()}"
        return "GUESS: unknown"


def _after_prefix(text: str, prefix: str) -> str:
    stripped = text.strip()
    if not stripped.upper().startswith(prefix):
        raise ParseError(f"reply must start with {prefix}", response=text)
    return stripped[len(prefix):].strip().lower()


class RelayMaster(DialogueGameMaster):
    def __init__(self, game_spec: GameSpec, experiment: dict, player_models: list[Model]):
        super().__init__(game_spec, experiment, player_models)
        self.max_rounds = int(experiment.get("max_rounds", 2))
        self.reprompt = bool(experiment.get("reprompt_on_error", False))

    def _on_setup(self, **instance):
        self.word = instance["word"]
        self.speaker = Speaker(self.player_models[0], self.word)
        self.listener = Listener(self.player_models[1])
        self.add_player(self.speaker, initial_context=SPEAKER_PROMPT.format(word=self.word))
        self.add_player(self.listener, initial_prompt=LISTENER_PROMPT)
        self.rounds_played = 0
        self.format_errors = 0
        self._again = False

    def _parse_response(self, player: Player, response: str) -> str:
        return _after_prefix(response, "WORD:" if player is self.speaker else "GUESS:")

    def _on_parse_error(self, error: ParseError):
        self.log_to_self("invalid format", str(error))
        if self.reprompt and self.format_errors < self.max_rounds:
            self.format_errors += 1
            self._again = True
            self.set_context_for(self.current_player, f"Invalid format ({error.reason}). Answer again.")
        else:
            self.state.abort()

    def _should_pass_turn(self) -> bool:
        again, self._again = self._again, False
        return not again

    def _advance_game(self, player: Player, parsed_response: str):
        if player is self.speaker:
            self.set_context_for(self.listener, f"WORD: {parsed_response}")
            return
        self.rounds_played += 1
        if parsed_response == self.word:
            self.log_to_self("correct guess", parsed_response)
            self.state.succeed()
        elif self.rounds_played >= self.max_rounds:
            self.log_to_self("max rounds reached", parsed_response)
            self.state.failed()
        else:
            self.log_to_self("wrong guess", parsed_response)
            self.set_context_for(self.speaker, f"Your partner guessed '{parsed_response}'. Try again: WORD: <the word>")

    def _on_after_game(self):
        outcome = self.state.outcome.value
        self.log_key(METRIC_ABORTED, int(outcome == "aborted"))
        self.log_key(METRIC_SUCCESS, int(outcome == "success"))
        self.log_key(METRIC_LOSE, int(outcome == "failure"))
        self.log_key("rounds_played", self.rounds_played)


class RelayScorer(GameScorer):
    def compute_round_score(self, round_idx, round_events):
        pass

    def compute_episode_scores(self, interactions: dict):
        if interactions[METRIC_ABORTED]:
            self.log_episode_score(BENCH_SCORE, math.nan)
        elif interactions[METRIC_SUCCESS]:
            self.log_episode_score(BENCH_SCORE, 100 / max(1, interactions["rounds_played"]))
        else:
            self.log_episode_score(BENCH_SCORE, 0)


class RelayBenchmark(GameBenchmark):
    def create_game_master(self, experiment: dict, player_models: list[Model]) -> DialogueGameMaster:
        return RelayMaster(self.game_spec, experiment, player_models)

    def create_game_scorer(self, experiment: dict, game_instance: dict) -> GameScorer:
        return RelayScorer(self.game_name, experiment, game_instance)
