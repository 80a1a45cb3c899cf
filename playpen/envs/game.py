"""A turn-based env over any clemcore game master (new ``DialogueGameMaster`` and the
legacy masters of the official clembench games).

Both master APIs share the driving interface clemcore's own runners use: ``setup``,
``before_game``, ``current_player``, ``get_context_for`` and ``step(response) ->
(done, info)``. Each player keeps its own message memory, which this env updates
exactly like clemcore's runners do (``perceive_context`` / ``perceive_response``)
before handing the response to the master.

The env attaches clemcore's own recorders, so a finished episode has a complete
``interactions.json`` and per-player request logs; :mod:`playpen.rollouts.records` writes them.
The outcome and Main Score are computed with the game's own scorer, i.e. exactly what
``clem score`` will compute from the records.
"""
from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Mapping, NamedTuple, Optional

from playpen.clem import clemcore, clemgame
from playpen.envs.loading import game_instance_rows, load_benchmark
from playpen.envs.turns import ended_by_limit, limit_turns
from playpen.outcomes import EpisodeOutcome, as_float, outcome_of
from playpen.rewards import OutcomeReward


class Observation(NamedTuple):
    """Whose turn it is and what they are given; unpacks as ``player, context``."""

    player: Any  # clemcore Player
    context: dict

    @property
    def player_name(self) -> str:
        return self.player.name

    @property
    def role(self) -> str:
        return self.player.game_role

    @property
    def messages(self) -> list[dict]:
        """The player's memory plus the new context: what a model is prompted with."""
        return [*self.player.get_perspective(), self.context]


@dataclass(frozen=True)
class Response:
    """A player's answer to one turn, and what its request log records about the call.

    ``prompt`` and ``response_object`` are clemcore's ``manipulated_prompt_obj`` and
    ``raw_response_obj`` (what ``player_N.requests.json`` holds); None records the
    context itself and an empty response object. ``num_new_tokens`` counts generated
    tokens (0 for programmatic and API players).
    """

    text: str
    prompt: Any = None
    response_object: Mapping[str, Any] = field(default_factory=dict)
    num_new_tokens: int = 0


@dataclass(frozen=True)
class EpisodeLog:
    """What an episode leaves for its records: ``interactions.json`` and the per-player
    request logs by file stem (``player_1`` → ``player_1.requests.json``)."""

    interactions: Optional[dict]
    requests: Mapping[str, Any]


@dataclass(frozen=True)
class StepResult:
    """The result of one env step. ``outcome``/``rewards`` are set once ``done``."""

    done: bool
    info: dict = field(default_factory=dict)
    outcome: Optional[str] = None  # "success" | "failure" | "aborted" when done
    main_score: float = math.nan
    rewards: Mapping[str, float] = field(default_factory=dict)  # per player name
    episode_scores: Mapping[str, Any] = field(default_factory=dict)


class GameEnv:
    """One episode at a time of one game.

    Args:
        benchmark: a loaded clemcore ``GameBenchmark`` (creates masters and scorers).
        player_models: one clemcore ``Model`` per player slot, as ``clem run`` passes them.
        reward_fn: ``(EpisodeOutcome, player_name, role) -> float`` (default OutcomeReward).
        results_folder: the model folder name recorded in ``interactions.json`` meta.
        max_turns: an episode still running after this many steps ends as aborted
            (:mod:`playpen.envs.turns`; None: the process's limit, 0: none).
    """

    def __init__(self, benchmark: Any, player_models: list, *,
                 reward_fn: Optional[Callable[[EpisodeOutcome, str, str], float]] = None,
                 results_folder: str = "", max_turns: Optional[int] = None):
        self.benchmark = benchmark
        self.max_turns = max_turns
        self.player_models = list(player_models)
        self.reward_fn = reward_fn or OutcomeReward()
        self.results_folder = results_folder
        self.game_master = None
        self.experiment: Optional[dict] = None
        self.game_instance: Optional[dict] = None
        self.interactions_recorder = None
        self.request_recorders: dict[str, Any] = {}
        self.last_result: Optional[StepResult] = None
        self.started_at: Optional[datetime] = None
        self._perceived = False  # the current player has taken in its current context

    # ------------------------------------------------------------------ properties
    @property
    def game_name(self) -> str:
        return self.benchmark.game_spec.game_name

    @property
    def done(self) -> bool:
        return self.last_result is not None and self.last_result.done

    @property
    def players(self) -> list:
        return self.game_master.get_players()

    @property
    def interactions(self) -> dict:
        return self.interactions_recorder.interactions

    def episode_log(self) -> EpisodeLog:
        """The interactions and request logs of the episode so far (None / empty before
        :meth:`reset`)."""
        interactions = self.interactions_recorder.interactions if self.interactions_recorder is not None else None
        requests = self.requests() if self.game_master is not None else {}
        return EpisodeLog(interactions, requests)

    def requests(self) -> dict[str, dict]:
        """Non-empty request logs by file stem (``player_1``), as clemcore writes them."""
        return {_file_stem(name): recorder.requests
                for name, recorder in self.request_recorders.items() if len(recorder) > 0}

    def model_infos(self) -> dict:
        return {idx: dict(model_spec=m.model_spec.to_dict(), gen_args=dict(m.gen_args))
                for idx, m in enumerate(self.player_models)}

    # ------------------------------------------------------------------ env contract
    def reset(self, experiment: dict, game_instance: Optional[dict] = None) -> Observation:
        """Create a fresh master for ``game_instance`` and return the first observation.

        Also accepts one clemcore instance row ``{"experiment", "game_instance"}``.
        """
        if game_instance is None:
            experiment, game_instance = experiment["experiment"], experiment["game_instance"]
        recorder_module = clemgame().recorder
        self.experiment, self.game_instance = experiment, game_instance
        self.last_result = None
        self.started_at = datetime.now()
        gm = limit_turns(self.benchmark.create_game_master(experiment, self.player_models), self.max_turns)
        gm.setup(**game_instance)
        self.game_master = gm
        # the same order as clemcore's InteractionsFileSaver / PlayerFileSaver (on_game_start)
        infos = self.model_infos()
        self.interactions_recorder = recorder_module.GameInteractionsRecorder(
            self.game_name, experiment["name"], game_instance["game_id"], self.results_folder, infos)
        for player in gm.get_players():
            self.interactions_recorder.log_player(player.name, player.game_role, player.model.name)
        gm.register(self.interactions_recorder)
        self.request_recorders = {}
        for player in gm.get_players():
            recorder = recorder_module.EventCallRecorder(
                self.game_name, experiment_name=experiment["name"], game_id=game_instance["game_id"],
                player_name=player.name, game_role=player.game_role, model_name=player.model.name)
            gm.register(recorder)
            player.register(recorder)
            self.request_recorders[player.name] = recorder
        gm.before_game()
        self._perceived = False
        return self.observe()

    def observe(self) -> Observation:
        """The current player and its context (no side effects)."""
        if self.done:
            raise RuntimeError("the episode is over; call reset()")
        player = self.game_master.current_player
        context = self.game_master.get_context_for(player)
        if context is None:
            raise RuntimeError(f"{self.game_name}: the master set no context for {player.name} "
                               f"({player.game_role}) although it is their turn")
        return Observation(player, context)

    def perceive(self) -> Observation:
        """Let the current player take in its context (memory + request log), as
        clemcore's Player does before it answers; idempotent until the next step."""
        observation = self.observe()
        if not self._perceived:
            observation.player.perceive_context(observation.context)
            self._perceived = True
        return observation

    def step(self, response: "Response | str") -> StepResult:
        """Give the current player's answer to the master and advance the game.

        A plain string is a :class:`Response` with nothing more to record.
        """
        if isinstance(response, str):
            response = Response(response)
        player, context = self.perceive()
        self._perceived = False
        response_object = dict(response.response_object)
        response_object.setdefault("clem_player", {"response": response.text, "model_name": player.model.name})
        meta = dict(prompt=response.prompt if response.prompt is not None else context,
                    response_object=response_object)
        player.perceive_response(response.text, metadata=meta)
        done, info = self.game_master.step(response.text)
        if not done:
            self.last_result = StepResult(done=False, info=info)
            return self.last_result
        self.last_result = self._final_result(info)
        return self.last_result

    def fork(self) -> "GameEnv":
        """A copy of this env and its game state; models, the benchmark and the experiment
        are shared, never copied."""
        shared = [self.benchmark, self.reward_fn, self.experiment, *self.player_models]
        memo = {id(obj): obj for obj in shared if obj is not None}
        clone = copy.deepcopy(self, memo)
        # clemcore's Player.__deepcopy__ drops the player's loggers: re-attach the copies
        for player in clone.game_master.get_players():
            recorder = clone.request_recorders.get(player.name)
            if recorder is not None:
                player.register(recorder)
        return clone

    # ------------------------------------------------------------------ outcome
    def _final_result(self, info: dict) -> StepResult:
        try:
            scores = score_episode(self.benchmark, self.experiment, self.game_instance, self.interactions)
        except Exception:
            if not ended_by_limit(self.game_master):
                raise
            # a scorer may expect what only a finished round logs: the limit decides alone
            scores = {"Aborted": 1, "Success": 0, "Lose": 0, "Main Score": math.nan}
        outcome = "aborted" if ended_by_limit(self.game_master) else outcome_of(scores, self.interactions,
                                                                               self.game_master)
        main_score = as_float(scores.get("Main Score"))
        if outcome == "aborted":
            main_score = math.nan
        episode = EpisodeOutcome(outcome, main_score, scores, self.interactions["meta"].get("round_count") or 0)
        rewards = {p.name: float(self.reward_fn(episode, p.name, p.game_role)) for p in self.players}
        return StepResult(done=True, info=info, outcome=outcome, main_score=main_score,
                          rewards=rewards, episode_scores=scores)


def answer_by_own_model(player: Any, context: dict, messages: list[dict], name: str = "programmatic") -> Response:
    """What ``player`` answers by its own model, as clemcore's ``Player`` would: a programmatic
    player (``CustomResponseModel``) by its ``_custom_response``, any other by its model called
    with ``messages`` (its memory plus ``context``); ``name`` is recorded for a player without a model.
    Serves the seats nobody outside the game plays."""
    model = getattr(player, "model", None)
    if model is None or isinstance(model, clemcore().backends.CustomResponseModel):
        text = player._custom_response(context)
        return Response(text, prompt=context, response_object={
            "clem_player": {"response": text, "model_name": getattr(model, "name", name)}})
    prompt, response_object, text = model.generate_response(list(messages))
    return Response(text, prompt=prompt, response_object=dict(response_object or {}))


def score_episode(benchmark: Any, experiment: dict, game_instance: dict, interactions: dict) -> dict:
    """The game's episode scores for these interactions (what ``clem score`` computes)."""
    scorer = benchmark.create_game_scorer(experiment, game_instance)
    # scorers read the interactions as loaded from JSON: give them exactly that
    scorer.compute_scores(json.loads(json.dumps(interactions)))
    return dict(scorer.scores.get("episode scores", {}))


def _file_stem(player_name: str) -> str:
    return "_".join(player_name.lower().strip().split(" "))  # Player 1 -> player_1 (clemcore's naming)


def make_env(game: str, player_models: Optional[list] = None, *,
             reward_fn: Optional[Callable[[EpisodeOutcome, str, str], float]] = None) -> tuple[GameEnv, list[dict]]:
    """A GameEnv for a game name and the game's instance rows; players default to the
    game's programmatic players (``player._custom_response``). Close ``env.benchmark``
    when done."""
    benchmark = load_benchmark(game)
    if player_models is None:
        backends = clemcore().backends
        player_models = [backends.CustomResponseModel() for _ in range(int(benchmark.game_spec.players))]
    return GameEnv(benchmark, player_models, reward_fn=reward_fn), game_instance_rows(benchmark.game_spec)
