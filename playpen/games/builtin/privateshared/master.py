"""privateshared: slot filling with scorekeeping probes.

One LLM player, the Answerer (Player 1), privately knows five slot values. A programmatic
Questioner asks for them one by one in a fixed random order; the Answerer replies with
one line `ANSWER: ...`. Before the first request and after every answer the game master
asks the Answerer, for every slot, whether the Questioner already knows it (`ASIDE: yes|no`).
Probes are asides: the Answerer does not keep them in its dialogue memory.

The Questioner is owned by the game master and always answers through its
`_custom_response`, so clemgame.json declares `players: 1` and `clem run -m X` plays X as
the Answerer (`-m programmatic` plays the programmatic Answerer policy).
"""
import math

from clemcore.backends import Model
from clemcore.backends.model_registry import CustomResponseModel
from clemcore.clemgame import DialogueGameMaster, GameBenchmark, GameScorer, Player
from clemcore.clemgame.errors import ParseError
from clemcore.clemgame.metrics import BENCH_SCORE, METRIC_ABORTED, METRIC_LOSE, METRIC_SUCCESS
from clemcore.clemgame.master import Outcome

import privateshared_rules as rules

QUESTIONER_NAME = "Player 2"
"""The Questioner is not registered with add_player (it is no agent of the runners), but
it appears in the interaction records under this name."""


class Answerer(Player):
    """The LLM role. Its programmatic policy answers every request with the exact slot value
    and answers probes from the set of slots its own answers have revealed so far."""

    def __init__(self, model: Model, *, slots: dict, requests: dict, probes: dict):
        super().__init__(model, game_role="Answerer")
        self.aside = False  # set by the game master: the pending context is a probe
        self._slots = dict(slots)
        self._requests = dict(requests)
        self._probes = {slot: list(texts) for slot, texts in probes.items()}
        self._revealed: set[str] = set()

    # Probes are asides: neither the probe nor the reply enters the dialogue memory, so the
    # next request is answered as if no probe had been asked (memorize=False in clemcore).
    def perceive_context(self, context, *, log_event=True, memorize=True):
        return super().perceive_context(context, log_event=log_event, memorize=memorize and not self.aside)

    def perceive_response(self, response, *, log_event=True, memorize=True, metadata=None):
        return super().perceive_response(response, log_event=log_event,
                                         memorize=memorize and not self.aside, metadata=metadata)

    def _custom_response(self, context) -> str:
        newest = rules.last_paragraph(context["content"])
        for slot, texts in self._probes.items():
            if any(text in newest for text in texts):
                verdict = "yes" if slot in self._revealed else "no"
                return f"{rules.ASIDE_PREFIX} {verdict}"
        for slot, text in self._requests.items():
            if text in newest:
                answer = f"{rules.ANSWER_PREFIX} {self._slots[slot]}."
                self._revealed.update(s for s, v in self._slots.items() if rules.mentions(answer, v))
                return answer
        return f"{rules.ANSWER_PREFIX} I am not sure."


class Questioner(Player):
    """Programmatic role: given `REQUEST: <SLOT>` it returns the instance's wording of the
    request for that slot."""

    def __init__(self, *, requests: dict):
        super().__init__(CustomResponseModel(), name=QUESTIONER_NAME, game_role="Questioner")
        self._requests = dict(requests)

    def _custom_response(self, context) -> str:
        slot = context["content"].removeprefix("REQUEST:").strip()
        return self._requests[slot]


class PrivateShared(DialogueGameMaster):
    """Round 0: one probe per slot. Rounds 1..5: one request + answer, then one probe per slot.
    Every Answerer reply is one step; a round ends after its last probe."""

    def _on_setup(self, **instance):
        self.slots: dict = instance["slots"]
        self.question_order: list = instance["question_order"]
        self.requests: dict = instance["requests"]
        self.probes: dict = instance["probes"]
        self.questioner_tag: str = instance["questioner_tag"]
        self.preamble: str = instance["initial_prompt"]

        self.answerer = Answerer(self.player_models[0], slots=self.slots, requests=self.requests,
                                 probes=self.probes)
        self.questioner = Questioner(requests=self.requests)
        self.add_player(self.answerer)

        self.known: set[str] = set()  # slots whose value appeared in an answer (the probes' truth)
        self.filled: list[bool] = []  # per request: did the answer contain the requested value
        self.probe_records: list[list[dict]] = [[]]  # per round
        self.asked_slot: str | None = None
        self.probe_slots = list(self.slots)  # probes follow the prompt's slot order
        self.probe_index = 0
        self.probe_tries = 0
        self.round_complete = False
        # Until the first request the Answerer has memorised nothing (probes are asides), so
        # the instructions travel with every context; the first request memorises them.
        self.preamble_pending = True
        self._start_probe()

    def _on_before_game(self):
        self.log_player(QUESTIONER_NAME, self.questioner.game_role, self.questioner.model.name)

    # --- contexts ----------------------------------------------------------------------

    def _with_preamble(self, text: str) -> str:
        return f"{self.preamble}\n\n{text}" if self.preamble_pending else text

    def _probe_text(self, slot: str) -> str:
        texts = self.probes[slot]  # the wording rotates from round to round
        return texts[max(self.current_round, 0) % len(texts)]

    def _start_probe(self, retry: bool = False):
        slot = self.probe_slots[self.probe_index]
        self.answerer.aside = True
        self.set_context_for(self.answerer,
                             self._with_preamble(rules.probe_context(self._probe_text(slot), retry=retry)))

    def _ask_next_request(self):
        slot = self.question_order[len(self.filled)]
        request_to_questioner = f"REQUEST: {slot}"
        self.log_event("GM", QUESTIONER_NAME, {"type": "send message", "content": request_to_questioner})
        request = self.questioner({"role": "user", "content": request_to_questioner})
        self.log_event(QUESTIONER_NAME, "GM", {"type": "get message", "content": request})
        context = self._with_preamble(rules.request_context(self.questioner_tag, request))
        self.preamble_pending = False
        self.asked_slot = slot
        self.answerer.aside = False
        self.set_context_for(self.answerer, context)

    # --- logging: probes are marked as forgotten, like clemcore's memorize=False ----------

    def log_gm_to_player(self, context, player):
        if not self.answerer.aside:
            return super().log_gm_to_player(context, player)
        self.log_event("GM", player.name, {"type": "send message", "content": context["content"],
                                           "label": "forget"})

    def log_player_to_gm(self, response, player):
        if not self.answerer.aside:
            return super().log_player_to_gm(response, player)
        self.log_event(player.name, "GM", {"type": "get message", "content": response, "label": "forget"})

    # --- game flow -----------------------------------------------------------------------

    def _on_before_round(self):
        self.round_complete = False
        if self.current_round >= 1:
            self.probe_records.append([])
            self._ask_next_request()

    def _parse_response(self, player, response: str):
        if self.answerer.aside:
            return rules.parse_aside(response)
        return rules.parse_answer(response)

    def _advance_game(self, player, parsed):
        if self.answerer.aside:
            self._record_probe(parsed)
        else:
            self._record_answer(parsed)

    def _record_answer(self, answer: str):
        slot = self.asked_slot
        filled = rules.mentions(answer, self.slots[slot])
        self.filled.append(filled)
        self.log_event("GM", "GM", {"type": "slot check", "slot": slot, "filled": filled,
                                    "content": f"{slot} {'filled' if filled else 'not filled'}"})
        for other, value in self.slots.items():
            if other not in self.known and rules.mentions(answer, value):
                self.known.add(other)
                if other != slot:
                    self.log_to_self("anticipated", f"{other} revealed while answering for {slot}")
        self.log_event("GM", QUESTIONER_NAME, {"type": "send message", "content": answer})
        self.asked_slot = None
        self.probe_index = 0
        self.probe_tries = 0
        self._start_probe()

    def _record_probe(self, said_yes: bool):
        slot = self.probe_slots[self.probe_index]
        truth = slot in self.known
        record = {"slot": slot, "truth": truth, "answer": said_yes, "tries": self.probe_tries + 1}
        self.probe_records[-1].append(record)
        verdict = "correct" if truth == said_yes else "wrong"
        self.log_event("GM", "GM", {"type": "probe check", **record,
                                    "content": f"{slot}: said {'yes' if said_yes else 'no'}, "
                                               f"truth {'yes' if truth else 'no'} ({verdict})"})
        self.probe_index += 1
        self.probe_tries = 0
        if self.probe_index < len(self.probe_slots):
            self._start_probe()
            return
        self.round_complete = True
        if len(self.filled) == len(self.question_order):
            all_right = all(r["truth"] == r["answer"] for rs in self.probe_records for r in rs)
            if all(self.filled) and all_right:
                self.state.succeed()
            else:
                self.state.failed()

    def _on_parse_error(self, error: ParseError):
        self.log_to_self("invalid format", error.reason)
        if not self.answerer.aside:
            self.state.abort()
            return
        self.probe_tries += 1
        if self.probe_tries >= rules.MAX_PROBE_TRIES:
            self.log_to_self("invalid format", f"no valid aside after {rules.MAX_PROBE_TRIES} tries")
            self.state.abort()
            return
        self._start_probe(retry=True)

    def _start_next_round(self) -> bool:
        return self.round_complete

    def _on_after_game(self):
        outcome = self.state.outcome
        self.log_key(METRIC_ABORTED, int(outcome is Outcome.ABORTED))
        self.log_key(METRIC_SUCCESS, int(outcome is Outcome.SUCCESS))
        self.log_key(METRIC_LOSE, int(outcome is Outcome.FAILURE))
        self.log_key("question_order", self.question_order)
        self.log_key("Filled Slots", self.filled)
        self.log_key("probes", self.probe_records)


class PrivateSharedScorer(GameScorer):
    """Main Score = 100 x harmonic mean(slot-filling accuracy, max(kappa, 0)) where kappa is
    Cohen's kappa between the probe replies and the truth over all probes of the episode."""

    def compute_round_score(self, round_idx, round_events) -> None:
        actions = [event["action"] for event in round_events]
        probes = [a for a in actions if a["type"] == "probe check"]
        if probes:
            accuracy = sum(a["truth"] == a["answer"] for a in probes) / len(probes)
            self.log_round_score(round_idx, "Accuracy", accuracy)
        for action in actions:
            if action["type"] == "slot check":
                self.log_round_score(round_idx, "Slot Filled?", int(action["filled"]))

    def compute_episode_scores(self, interactions) -> None:
        if interactions[METRIC_ABORTED]:
            for key in ("Slot-Filling-Accuracy", "Accuracy", "Kappa", "Truncated Kappa", BENCH_SCORE):
                self.log_episode_score(key, math.nan)
            return
        actions = [event["action"] for turn in interactions["turns"] for event in turn]
        probes = [a for a in actions if a["type"] == "probe check"]
        filled = [a["filled"] for a in actions if a["type"] == "slot check"]
        slot_accuracy = sum(filled) / len(self.game_instance["slots"])
        truth = [a["truth"] for a in probes]
        said = [a["answer"] for a in probes]
        kappa = rules.cohen_kappa(truth, said)
        accuracy = sum(t == s for t, s in zip(truth, said)) / len(probes) if probes else math.nan
        self.log_episode_score("Slot-Filling-Accuracy", slot_accuracy)
        self.log_episode_score("Accuracy", accuracy)
        self.log_episode_score("Kappa", kappa)
        self.log_episode_score("Truncated Kappa", max(kappa, 0.0) if not math.isnan(kappa) else math.nan)
        self.log_episode_score(BENCH_SCORE, rules.main_score(slot_accuracy, kappa))


class PrivateSharedBenchmark(GameBenchmark):

    def create_game_master(self, experiment: dict, player_models: list[Model]) -> PrivateShared:
        return PrivateShared(self.game_spec, experiment, player_models)

    def create_game_scorer(self, experiment: dict, game_instance: dict) -> PrivateSharedScorer:
        return PrivateSharedScorer(self.game_name, experiment, game_instance)
