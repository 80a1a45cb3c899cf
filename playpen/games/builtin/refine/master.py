"""refine: a Generator drafts, a Critic comments, the Generator revises, for a set number
of rounds; a programmatic checker scores the final draft. See README.md."""
from __future__ import annotations

import math
from string import Template

from clemcore.backends import Model
from clemcore.clemgame import DialogueGameMaster, GameBenchmark, GameScorer, GameSpec, Player
from clemcore.clemgame.errors import ParseError
from clemcore.clemgame.metrics import BENCH_SCORE, METRIC_ABORTED, METRIC_LOSE, METRIC_SUCCESS

from refine_policy import critic_reply, generator_reply
from refine_rules import check_draft, describe, parse_critique, parse_draft, score_draft

DEFAULT_REVISIONS = 1
CRITIQUE_HEADER = "The Critic's comments:\n"


class Generator(Player):
    """Player 1. The programmatic policy follows the critiques it received (its messages)."""

    def __init__(self, model: Model, topic: str, association: str):
        super().__init__(model, game_role="Generator")
        self.topic, self.association = topic, association

    def _custom_response(self, context: dict) -> str:
        texts = [m["content"] for m in self.get_perspective() if m["role"] == "user"] + [context["content"]]
        critiques = [text.partition(CRITIQUE_HEADER)[2].partition("\n\nWrite your")[0]
                     for text in texts if CRITIQUE_HEADER in text]
        drafts = [m["content"] for m in self.get_perspective() if m["role"] == "assistant"]
        previous = drafts[-1].partition(":")[2].strip() if drafts else ""
        return generator_reply(self.topic, self.association, critiques, previous)


class Critic(Player):
    """Player 2. The programmatic policy checks the draft against the requirements (its prompt)."""

    def __init__(self, model: Model, constraints: dict):
        super().__init__(model, game_role="Critic")
        self.constraints = constraints

    def _custom_response(self, context: dict) -> str:
        draft = context["content"].rpartition("The Generator's draft:\n")[2].partition("\n\nWrite your")[0]
        return critic_reply(draft, self.constraints)


class RefineGameMaster(DialogueGameMaster):
    """Draft, then `revisions` x (critique, revision); the last draft is checked."""

    def __init__(self, game_spec: GameSpec, experiment: dict, player_models: list[Model]):
        super().__init__(game_spec, experiment, player_models)
        self.revisions = int(experiment.get("revisions", DEFAULT_REVISIONS))
        self.templates = {name: Template(self.load_template(f"resources/{name}_prompt").strip())
                          for name in ("generator", "critic")}

    def _on_setup(self, **instance):
        self.constraints = instance["constraints"]
        self.drafts: list[str] = []
        self.aborted_by = None
        self.generator = Generator(self.player_models[0], instance["topic"], instance["association"])
        self.critic = Critic(self.player_models[1], self.constraints)
        values = dict(topic=instance["topic"], revisions=self.revisions,
                      requirements="\n".join(f"- {line}" for line in describe(self.constraints)))
        self.add_player(self.generator, initial_context=self.templates["generator"].substitute(values))
        self.add_player(self.critic, initial_prompt=self.templates["critic"].substitute(values))

    def _parse_response(self, player: Player, response: str):
        return parse_draft(response) if player is self.generator else parse_critique(response)

    def _advance_game(self, player: Player, parsed_response):
        if player is self.critic:
            self.log_to_self("critique", parsed_response)
            left = self.revisions - len(self.drafts) + 1
            last = " This is your last revision: it is the one that is scored." if left == 1 else ""
            self.set_context_for(self.generator, f"{CRITIQUE_HEADER}{parsed_response}\n\n"
                                                 f"Write your revised draft.{last}")
            return
        self.drafts.append(parsed_response)
        score = score_draft(parsed_response, self.constraints)
        self.log_to_self("draft", f"draft {len(self.drafts)} meets {score:.0f}% of the requirements")
        if len(self.drafts) > self.revisions:
            if all(check_draft(parsed_response, self.constraints).values()):
                self.state.succeed()
            else:
                self.state.failed()
            return
        self.set_context_for(self.critic, f"The Generator's draft:\n{parsed_response}\n\nWrite your critique.")

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
        self.log_key("Drafts", self.drafts)


class RefineScorer(GameScorer):
    """Main Score: 100 × the share of the requirements the final draft meets; NaN when
    aborted. `Improvement`: final minus first draft's score (the critic's contribution)."""

    def compute_episode_scores(self, interactions: dict):
        constraints = self.game_instance["constraints"]
        drafts = interactions.get("Drafts") or []
        for role in ("Generator", "Critic"):
            self.log_episode_score(f"Aborted by {role}", int(interactions.get("Aborted by") == role))
        if interactions[METRIC_ABORTED] or not drafts:
            for key in ("First Draft Score", "Improvement", "Constraints Met", BENCH_SCORE):
                self.log_episode_score(key, math.nan)
            return
        first, final = score_draft(drafts[0], constraints), score_draft(drafts[-1], constraints)
        self.log_episode_score("First Draft Score", first)
        self.log_episode_score("Improvement", final - first)
        self.log_episode_score("Constraints Met", sum(check_draft(drafts[-1], constraints).values()))
        self.log_episode_score(BENCH_SCORE, final)


class RefineBenchmark(GameBenchmark):

    def create_game_master(self, experiment: dict, player_models: list[Model]) -> DialogueGameMaster:
        return RefineGameMaster(self.game_spec, experiment, player_models)

    def create_game_scorer(self, experiment: dict, game_instance: dict) -> GameScorer:
        return RefineScorer(self.game_name, experiment, game_instance)
