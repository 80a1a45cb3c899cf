"""probes (toy, clemcore's LEGACY master API): the Keeper knows a list and names item k when
asked (``ITEM: <word>``; any non-empty reply counts as an answer, so even a random model
plays every step). After each answer the master asks the Keeper's model, INSIDE the
step and outside the dialogue (``player(probe, memorize=False)``), whether it has named that
item yet (``yes``/``no``): a side call, whose answers decide the Main Score. Before the first
question the master inserts a pseudo turn: an introduction and an "Ok." in the Keeper's name
that no model produced, logged with ``label: "pseudo"``. See ../README.md."""
import math

from clemcore.backends import Model
from clemcore.clemgame import GameBenchmark, GameSpec, Player
from clemcore.clemgame.legacy.master import DialogueGameMaster
from clemcore.clemgame.legacy.scorer import GameScorer
from clemcore.clemgame.metrics import BENCH_SCORE, METRIC_ABORTED, METRIC_LOSE, METRIC_SUCCESS, \
    METRIC_REQUEST_COUNT, METRIC_REQUEST_COUNT_PARSED, METRIC_REQUEST_COUNT_VIOLATED

INTRO = "We play a memory game: I ask for the items of your list one by one."


def question(index: int) -> str:
    return f"What is item {index + 1}? Reply with one line: ITEM: <word>"


class Keeper(Player):
    def __init__(self, model: Model, items: list):
        super().__init__(model, game_role="Keeper")
        self.items, self.named = items, set()

    def _custom_response(self, context: dict) -> str:
        if context["content"].startswith("ASIDE"):
            return "yes" if context["content"].split("'")[1] in self.named else "no"
        item = self.items[int(context["content"].split()[3].rstrip("?")) - 1]
        self.named.add(item)
        return f"ITEM: {item}"


class ProbesMaster(DialogueGameMaster):
    def __init__(self, game_spec: GameSpec, experiment: dict, player_models: list[Model]):
        super().__init__(game_spec, experiment, player_models)

    def _on_setup(self, **instance):
        self.items = list(instance["items"])
        self.keeper = Keeper(self.player_models[0], self.items)
        self.add_player(self.keeper, initial_context=question(0))
        self.index, self.right, self.probes_right, self.aborted = 0, 0, 0, False
        self.requests = self.violated = 0

    def _on_before_game(self):
        # the pseudo turn: in the Keeper's memory and in the log, never said by its model
        self.keeper.perceive_context({"role": "user", "content": INTRO}, log_event=False)
        self.keeper.perceive_response("Ok.", log_event=False)
        self.log_event(from_="GM", to=self.keeper.name, action={"type": "send message", "content": INTRO})
        self.log_event(from_=self.keeper.name, to="GM",
                       action={"type": "get message", "content": "Ok.", "label": "pseudo"})

    def _does_game_proceed(self) -> bool:
        return not self.aborted and self.index < len(self.items)

    def _validate_player_response(self, player: Player, response: str) -> bool:
        self.requests += 1
        if not response.strip():  # anything else is an answer (right or wrong): never stuck
            self.aborted, self.violated = True, self.violated + 1
            self.log_to_self("empty reply", response)
            return False
        return True

    def _parse_response(self, player: Player, response: str) -> str:
        text = response.strip()
        return (text[5:] if text.upper().startswith("ITEM:") else text).strip().lower()

    def _on_valid_player_response(self, player: Player, parsed_response: str):
        item = self.items[self.index]
        self.right += int(parsed_response == item)
        # the side call: the model answers inside this step; nothing enters the dialogue
        probe = {"role": "user", "content": f"ASIDE: have you named '{item}' yet? Reply yes or no."}
        reply = player(probe, memorize=False)
        correct = reply.strip().lower().startswith("yes")
        self.probes_right += int(correct)
        self.log_to_self("probe", {"item": item, "reply": reply, "correct": correct})
        self.index += 1
        if self.index < len(self.items):
            self.set_context_for(player, question(self.index))

    def _on_after_game(self):
        success = not self.aborted and self.right == self.probes_right == len(self.items)
        self.log_key(METRIC_ABORTED, int(self.aborted))
        self.log_key(METRIC_SUCCESS, int(success))
        self.log_key(METRIC_LOSE, int(not self.aborted and not success))
        self.log_key(METRIC_REQUEST_COUNT, self.requests)
        self.log_key(METRIC_REQUEST_COUNT_PARSED, self.requests - self.violated)
        self.log_key(METRIC_REQUEST_COUNT_VIOLATED, self.violated)
        self.log_key("probes_right", self.probes_right)
        self.log_key("num_items", len(self.items))


class ProbesScorer(GameScorer):
    def score_turns(self, interactions: dict) -> None:
        for index, _ in enumerate(interactions["turns"]):
            self.log_turn_score(index, "played", 1)

    def log_main_score(self, interactions: dict):
        if interactions[METRIC_ABORTED]:
            self.log_episode_score(BENCH_SCORE, math.nan)
        else:
            self.log_episode_score(BENCH_SCORE, 100 * interactions["probes_right"] / interactions["num_items"])


class ProbesBenchmark(GameBenchmark):
    def create_game_master(self, experiment: dict, player_models: list[Model]):
        return ProbesMaster(self.game_spec, experiment, player_models)

    def create_game_scorer(self, experiment: dict, game_instance: dict):
        return ProbesScorer(self.game_name, experiment, game_instance)
