"""wordle, wordle_withclue and wordle_withcritic: one game master for the three variants.

The variant is the game name of the spec (clemgame.json lists all three); the instance
files are shared (target word + clue). See README.md for rules, formats and scores.
"""
import math
import re
from string import Template

from clemcore import backends
from clemcore.clemgame import DialogueGameMaster, GameBenchmark, GameScorer, GameSpec, Player
from clemcore.clemgame.errors import GameError, ParseError

from wordle_rules import (GREEN, MAX_ATTEMPTS, MAX_REPROMPTS, VARIANT_WITHCLUE, VARIANT_WITHCRITIC,
                          VARIANTS, YELLOW, CriticReply, GuessReply, InvalidWordError, feedback,
                          format_feedback, main_score, parse_critic_reply, parse_feedback_lines,
                          parse_guess_reply)
from wordle_solver import default_solver, explain_inconsistency, load_word_list

GUESS_FORMAT = "explanation: <your reason>\nguess: <five-letter word>"
CRITIC_FORMAT = "explanation: <your reason>\nagreement: <yes or no>"
CRITIC_VERDICT_KEY = "critic_agreement:"
_GUESS_LINE_RE = re.compile(r"^\s*guess:\s*([A-Za-z]{5})\s*$", re.IGNORECASE | re.MULTILINE)
_PROPOSAL_LINE_RE = re.compile(r"^\s*guesser_guess:\s*([a-z]{5})\s*$", re.MULTILINE)
_CLUE_LINE_RE = re.compile(r"^\s*clue:\s*(.*)$", re.MULTILINE)
_INVALID_WORD_RE = re.compile(r"'([a-z]{5})' is not a valid word")

# Phases of an attempt: who acts next.
GUESS, PROPOSE, CRITIQUE, COMMIT = "guess", "propose", "critique", "commit"


def _user_texts(player: Player, context: dict) -> list[str]:
    """Everything the GM has told `player` so far, the current context included."""
    texts = [m["content"] for m in player.get_perspective() if m.get("role") == "user"]
    if not texts or texts[-1] != context["content"]:
        texts.append(context["content"])
    return texts


def _last_own_guess(player: Player) -> str | None:
    for message in reversed(player.get_perspective()):
        if message.get("role") == "assistant":
            match = _GUESS_LINE_RE.search(message.get("content", ""))
            return match.group(1).lower() if match else None
    return None


def _feedback_history(texts: list[str]) -> list[tuple[str, tuple[str, ...]]]:
    seen, history = set(), []
    for text in texts:
        for entry in parse_feedback_lines(text):
            if entry not in seen:
                seen.add(entry)
                history.append(entry)
    return history


class WordleGuesser(Player):
    """Guesses the word. Programmatic policy: a feedback-consistent entropy solver that
    takes the critic's verdict into account (commits a consistent word after a 'no')."""

    def __init__(self, model: backends.Model):
        super().__init__(model, game_role="Guesser")

    def _custom_response(self, context: dict) -> str:
        solver = default_solver()
        texts = _user_texts(self, context)
        history = _feedback_history(texts)
        rejected = set(_INVALID_WORD_RE.findall("\n".join(texts)))
        verdict = re.search(rf"^\s*{CRITIC_VERDICT_KEY}\s*(yes|no)\b", context["content"],
                            re.IGNORECASE | re.MULTILINE)
        proposal = _last_own_guess(self)
        if verdict and proposal:
            if verdict.group(1).lower() == "yes":
                return (f"explanation: The critic agrees, so I keep my proposal.\n"
                        f"guess: {proposal}")
            word = solver.best_guess(history, exclude=rejected | {proposal}, consistent_only=True)
            if explain_inconsistency(word, history) is None:
                return (f"explanation: The critic disagrees, so I switch to '{word}', "
                        f"which fits all the feedback so far.\nguess: {word}")
            return (f"explanation: The critic disagrees, but no other word fits the feedback, "
                    f"so I keep my proposal.\nguess: {proposal}")
        word = solver.best_guess(history, exclude=rejected)
        return f"explanation: {self._reason(solver, history, word)}\nguess: {word}"

    @staticmethod
    def _reason(solver, history, word) -> str:
        if not history:
            return "No feedback yet, so I start with a word of frequent letters."
        num_left = len(solver.candidates(history))
        if num_left == 1:
            return "Only this word fits all the feedback."
        fits = explain_inconsistency(word, history) is None
        return (f"About {num_left} words still fit the feedback; "
                f"{'this one is likely and' if fits else 'this word'} splits them best.")


class WordleCritic(Player):
    """Judges the guesser's proposal. Programmatic policy: disagree when the proposal
    contradicts earlier feedback or appears in the clue itself, agree otherwise."""

    def __init__(self, model: backends.Model):
        super().__init__(model, game_role="Critic")

    def _custom_response(self, context: dict) -> str:
        texts = _user_texts(self, context)
        history = _feedback_history(texts)
        proposals = _PROPOSAL_LINE_RE.findall(context["content"])
        if not proposals:
            return "explanation: I cannot find the proposed guess.\nagreement: no"
        proposal = proposals[-1]
        clues = _CLUE_LINE_RE.findall(context["content"])
        clue_words = set(re.findall(r"[a-z]+", clues[-1].lower())) if clues else set()
        reason = explain_inconsistency(proposal, history)
        if reason is None and proposal in clue_words:
            reason = f"'{proposal}' appears in the clue itself, and a clue never contains its answer"
        if reason is not None:
            return f"explanation: {reason}.\nagreement: no"
        if history:
            return (f"explanation: '{proposal}' agrees with all the feedback so far "
                    f"and may fit the clue.\nagreement: yes")
        return f"explanation: There is no feedback yet and '{proposal}' may fit the clue.\nagreement: yes"


class WordleGameMaster(DialogueGameMaster):
    """Runs one episode of a wordle variant (chosen by the spec's game name)."""

    def __init__(self, game_spec: GameSpec, experiment: dict, player_models: list[backends.Model]):
        super().__init__(game_spec, experiment, player_models)
        if game_spec.game_name not in VARIANTS:
            raise ValueError(f"unknown wordle variant '{game_spec.game_name}'; "
                             f"clemgame.json may only list {VARIANTS}")
        self.variant = game_spec.game_name
        self.with_critic = self.variant == VARIANT_WITHCRITIC
        self.word_list = load_word_list()

    def _on_setup(self, **instance):
        self.target = instance["target_word"]
        self.clue = instance["clue"]
        if self.target not in self.word_list:
            raise ValueError(f"target '{self.target}' (game {instance.get('game_id')}) is not in "
                             f"resources/allowed_words.txt")
        self.guesses: list[str] = []
        self.colors: list[tuple[str, ...]] = []
        self.invalid_words: list[str] = []
        self.proposals: list[str] = []
        self.critic_agreements: list[int] = []
        self.phase = PROPOSE if self.with_critic else GUESS
        self._attempt_done = False
        self.guesser = WordleGuesser(self.player_models[0])
        self.add_player(self.guesser, initial_context=self._initial_prompt())
        if self.with_critic:
            self.critic = WordleCritic(self.player_models[1])
            self.add_player(self.critic, initial_prompt=self._render("critic_prompt"))

    def _render(self, name: str) -> str:
        return Template(self.load_template(f"resources/{name}")).substitute(
            max_attempts=MAX_ATTEMPTS, max_reprompts=MAX_REPROMPTS, clue=self.clue).strip()

    def _initial_prompt(self) -> str:
        name = {VARIANT_WITHCLUE: "guesser_prompt_withclue",
                VARIANT_WITHCRITIC: "guesser_prompt_withcritic"}.get(self.variant, "guesser_prompt")
        return self._render(name)

    # --- turn order -----------------------------------------------------------------
    def _player_for_phase(self) -> Player:
        return self.critic if self.phase == CRITIQUE else self.guesser

    def _should_pass_turn(self) -> bool:
        return self._player_for_phase() is not self.current_player

    def _start_next_round(self) -> bool:
        return self._attempt_done  # one round = one attempt (re-prompts stay in the round)

    def _on_before_round(self):
        self._attempt_done = False

    # --- moves ----------------------------------------------------------------------
    def _parse_response(self, player: Player, response: str):
        if player is self.guesser:
            return parse_guess_reply(response)
        return parse_critic_reply(response)

    def _advance_game(self, player: Player, parsed):
        if isinstance(parsed, CriticReply):
            self._on_critic_reply(parsed)
            return
        if parsed.guess not in self.word_list:
            raise InvalidWordError(parsed.guess)
        if self.phase == PROPOSE:
            self._on_proposal(parsed)
        else:
            self._on_final_guess(parsed)

    def _on_proposal(self, reply: GuessReply):
        self.proposals.append(reply.guess)
        history = "\n".join(f"guess_feedback: {format_feedback(g, c)}"
                            for g, c in zip(self.guesses, self.colors)) or "There is no feedback yet."
        self.set_context_for(self.critic, (
            f"{history}\nclue: {self.clue}\n"
            f"guesser_explanation: {reply.explanation}\nguesser_guess: {reply.guess}\n\n"
            f"Do you agree with this guess? Reply in the two-line format:\n{CRITIC_FORMAT}"))
        self.phase = CRITIQUE

    def _on_critic_reply(self, reply: CriticReply):
        self.critic_agreements.append(int(reply.agrees))
        self.log_to_self("critic verdict", f"agreement: {'yes' if reply.agrees else 'no'}")
        self.set_context_for(self.guesser, (
            f"{CRITIC_VERDICT_KEY} {'yes' if reply.agrees else 'no'}\n"
            f"critic_explanation: {reply.explanation}\n\n"
            f"Now give your final guess for this attempt (keep your proposal or change it) "
            f"in the two-line format:\n{GUESS_FORMAT}"))
        self.phase = COMMIT

    def _on_final_guess(self, reply: GuessReply):
        colors = feedback(reply.guess, self.target)
        self.guesses.append(reply.guess)
        self.colors.append(colors)
        self._attempt_done = True
        shown = format_feedback(reply.guess, colors)
        self.log_to_self("guess feedback", f"attempt {len(self.guesses)}: {reply.guess} -> {shown}")
        if reply.guess == self.target:
            self.log_to_self("correct guess", "game_result = SUCCESS")
            self.state.succeed()
            return
        left = MAX_ATTEMPTS - len(self.guesses)
        if left == 0:
            self.log_to_self("attempts exhausted", "game_result = LOSE")
            self.state.failed()
            return
        ask = "Propose your next guess" if self.with_critic else "Make your next guess"
        self.set_context_for(self.guesser, (
            f"guess_feedback: {shown}\n\n"
            f"You have {left} attempt{'s' if left > 1 else ''} left. "
            f"{ask} in the two-line format:\n{GUESS_FORMAT}"))
        if self.with_critic:
            self.phase = PROPOSE

    # --- errors ---------------------------------------------------------------------
    def _on_parse_error(self, error: ParseError):
        self.log_to_self("invalid format", f"{error.reason}; game_result = ABORT")
        self.state.abort()

    def _on_game_error(self, error: GameError):
        if not isinstance(error, InvalidWordError):
            raise error
        self.invalid_words.append(error.word)
        if len(self.invalid_words) > MAX_REPROMPTS:
            self.log_to_self("invalid word", f"{error.reason}; no re-prompts left; game_result = ABORT")
            self.state.abort()
            return
        left = MAX_REPROMPTS - len(self.invalid_words)
        self.log_to_self("invalid word", f"{error.reason}; re-prompt ({left} left)")
        self.set_context_for(self.guesser, (
            f"'{error.word}' is not a valid word for this game. Try a different word "
            f"(this attempt does not count; {left} more invalid word{'s' if left != 1 else ''} "
            f"will be accepted in this game). Reply in the two-line format:\n{GUESS_FORMAT}"))

    def _on_after_game(self):
        outcome = self.state.outcome.value
        self.log_key("Aborted", int(outcome == "aborted"))
        self.log_key("Success", int(outcome == "success"))
        self.log_key("Lose", int(outcome == "failure"))
        self.log_key("target_word", self.target)
        self.log_key("clue", self.clue)
        self.log_key("guesses", list(self.guesses))
        self.log_key("guess_feedback", [list(c) for c in self.colors])
        self.log_key("invalid_words", list(self.invalid_words))
        if self.with_critic:
            self.log_key("proposals", list(self.proposals))
            self.log_key("critic_agreements", list(self.critic_agreements))


class WordleScorer(GameScorer):
    """Main Score by variant (see wordle_rules.main_score); NaN when aborted."""

    def compute_round_score(self, round_idx, round_events) -> None:
        pass  # per-attempt scores are logged from the episode keys below

    def compute_episode_scores(self, interactions: dict):
        guesses = interactions.get("guesses", [])
        colors = interactions.get("guess_feedback", [])
        for idx, attempt_colors in enumerate(colors):
            self.log_round_score(idx, "Green Letters", sum(c == GREEN for c in attempt_colors))
            self.log_round_score(idx, "Yellow Letters", sum(c == YELLOW for c in attempt_colors))
        extra = {"Attempts": len(guesses), "Invalid Words": len(interactions.get("invalid_words", []))}
        if self.game_name == VARIANT_WITHCRITIC:
            extra.update(self._critic_scores(interactions))
        if interactions["Aborted"]:
            self.log_episode_score("Main Score", math.nan)
            for name in extra:
                self.log_episode_score(name, math.nan)
            return
        self.log_episode_score("Main Score",
                               main_score(self.game_name, len(guesses), bool(interactions["Success"])))
        for name, value in extra.items():
            self.log_episode_score(name, value)

    @staticmethod
    def _critic_scores(interactions: dict) -> dict:
        agreements = interactions.get("critic_agreements", [])
        proposals = interactions.get("proposals", [])
        guesses = interactions.get("guesses", [])
        kept_after_no = [p == g for p, g, a in zip(proposals, guesses, agreements) if not a]
        return {
            "Critic Agreement Rate": sum(agreements) / len(agreements) if agreements else math.nan,
            "Kept Guess After Disagreement Rate":
                sum(kept_after_no) / len(kept_after_no) if kept_after_no else math.nan,
        }


class WordleBenchmark(GameBenchmark):

    def __init__(self, game_spec: GameSpec):
        super().__init__(game_spec)

    def create_game_master(self, experiment: dict, player_models: list[backends.Model]):
        return WordleGameMaster(self.game_spec, experiment, player_models)

    def create_game_scorer(self, experiment: dict, game_instance: dict) -> GameScorer:
        return WordleScorer(self.game_name, experiment, game_instance)
