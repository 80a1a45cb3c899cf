"""playpen's games as standard environments: PettingZoo (AEC), Gymnasium and an OpenEnv server.

clemcore 3.7 ships these wrappers (``clemcore.clemgame.envs``): a PettingZoo AEC env over any
game master, a single-learner Gymnasium env on top of it, and the OpenEnv server that
``clem serve`` runs. They work on playpen's games as they are (``tests/test_interop.py`` plays
every one). This module builds the same stacks from clemcore's own classes and changes three
things, each measured there:

- **the game lookup**: clemcore finds a game only in ``./game_registry.json`` and a scan of the
  working directory, and ``clem serve --split`` reads the training split from the model hub.
  Here a game is found as playpen finds it (packaged games with no registry file,
  ``source:game``, a folder path) and ``instances="instances_train"`` picks the game's own
  training file, offline.
- **the end-of-episode reward**: clemcore's default reward reads the master's
  ``state.outcome``, which the legacy masters of the official clembench games never set: every
  episode of theirs, won or aborted, is worth 0. Here the outcome comes from the game's own
  scorer, as ``clem score`` and playpen's trainers read it (:func:`playpen.outcomes.outcome_of`).
- **who is rewarded**: clemcore gives every seat the one outcome, so in a game that says who
  won (``<Role> Win`` scores: adversarial_taboo) the loser is rewarded for the winner's success.
  The default here, :func:`outcome_reward`, rewards per role in such games.

``reward`` is any playpen reward function ``(EpisodeOutcome, player_name, role) -> float``
(:mod:`playpen.rewards`), asked once per seat when the episode ends; ``reward=None`` keeps
clemcore's ``reward_func`` for the end as well. Steps before the end get clemcore's
``reward_func`` (default 0).

Importing this module imports clemcore's game code (seconds; its side effects contained by
:mod:`playpen.clem`), which is why :mod:`playpen.envs` does not import it.
"""
from __future__ import annotations

import logging
import math
from typing import Any, Callable, Optional

from playpen.clem import clemgame, preserved_logging
from playpen.envs.game import score_episode
from playpen.envs.loading import cause
from playpen.envs.turns import TurnLimitedBenchmark
from playpen.errors import RolloutError
from playpen.models import load_model_by_name
from playpen.outcomes import EpisodeOutcome, as_float, flag, outcome_of
from playpen.registry import game_spec

clemgame()  # clemcore's logging side effects contained before its submodules load
with preserved_logging():
    from clemcore.backends.model_registry import Model
    from clemcore.clemgame.callbacks.base import GameBenchmarkCallback, GameBenchmarkCallbackList
    from clemcore.clemgame.envs.openenv.models import ClemGameAction, ClemGameObservation, ClemGameState
    from clemcore.clemgame.envs.openenv.server.environment import ClemGameEnvironment
    from clemcore.clemgame.envs.pettingzoo.master import GameMasterEnv
    from clemcore.clemgame.envs.pettingzoo.wrappers import (AECToGymWrapper, GameBenchmarkWrapper,
                                                            GameInstanceIteratorWrapper, SinglePlayerWrapper)
    from clemcore.clemgame.instances import GameInstances
    from clemcore.clemgame.recorder import GameInteractionsRecorder
    from openenv.core import Environment, create_app
    from gymnasium import spaces
    from pettingzoo.utils.wrappers import OrderEnforcingWrapper

logger = logging.getLogger(__name__)
RewardFunction = Callable[[EpisodeOutcome, str, str], float]
# clemcore's default scale, so that swapping clemcore's env for this one changes no magnitudes
OUTCOME_SCALE = {"success": 1.0, "failure": 0.0, "aborted": -1.0}


def outcome_reward(outcome: EpisodeOutcome, player_name: str = "", role: str = "") -> float:
    """Success 1, failure 0, aborted -1 (clemcore's scale). In a game that logs who won
    (``<Role> Win``), 1 for the winner's role and 0 for the others; a tie is 0 for all."""
    wins = {key[:-len(" Win")]: flag(value) for key, value in outcome.episode_scores.items()
            if str(key).endswith(" Win")}
    if wins and outcome.outcome != "aborted":
        return 1.0 if wins.get(role) else 0.0
    return OUTCOME_SCALE[outcome.outcome]


class AnyText(spaces.Text):
    """A text space that holds any string up to ``max_length``. Gymnasium's ``Text`` holds only
    its character set (letters and digits by default), so clemcore's observation space does not
    contain the games' own prompts (spaces, punctuation, ``×``, ``▢``) and PettingZoo's
    ``api_test`` fails on the first observation. Samples still draw from the character set."""

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length


class _EpisodeRecorder(GameBenchmarkCallback):
    """Attaches clemcore's interactions recorder to each new master, before its first event:
    the game's scorer reads the outcome from those interactions."""

    def __init__(self, env: "OutcomeRewardEnv"):
        self.env = env
        self.recorder: Optional[GameInteractionsRecorder] = None

    def on_game_start(self, game_master, game_instance):
        players = game_master.get_players()
        self.recorder = GameInteractionsRecorder(
            self.env.game_benchmark.game_spec.game_name, self.env.experiment["name"],
            game_instance.get("game_id"), "playpen-env", {p.name: p.model.name for p in players})
        for player in players:
            self.recorder.log_player(player.name, player.game_role, player.model.name)
        game_master.register(self.recorder)


class OutcomeRewardEnv(GameMasterEnv):
    """clemcore's PettingZoo AEC env whose end-of-episode rewards come from ``reward``, a
    playpen reward function asked once per seat (see the module docstring for why)."""

    def __init__(self, game_benchmark, *, callbacks=None, reward: Optional[RewardFunction] = outcome_reward,
                 reward_func=None, feedback_func=None, max_turns: Optional[int] = None):
        self._episode = _EpisodeRecorder(self)
        callbacks = GameBenchmarkCallbackList([self._episode, *getattr(callbacks, "callbacks", callbacks or [])])
        # an episode still running after max_turns steps ends as aborted (playpen.envs.turns)
        super().__init__(TurnLimitedBenchmark(game_benchmark, max_turns), callbacks=callbacks,
                         reward_func=reward_func, feedback_func=feedback_func)
        # contexts grow with the episode (wordle's feedback, privateshared's probes): no cap
        # short of what a model could read, and any character a game writes
        self._observation_space = spaces.Dict({"role": AnyText(max_length=128),
                                               "content": AnyText(max_length=1_000_000)})
        self._action_space = AnyText(max_length=8192)
        self._reward = reward
        self.last_outcome: Optional[EpisodeOutcome] = None
        self._keep_step_rewards = False

    def reset(self, seed=None, options=None):
        self.last_outcome = None
        super().reset(seed, options)

    def episode_outcome(self) -> EpisodeOutcome:
        """How the episode just finished ended, read from the game's own scores."""
        interactions = self._episode.recorder.interactions
        try:
            scores = score_episode(self.game_benchmark, self.experiment, self.game_instance, interactions)
        except Exception as e:  # a scorer that fails on this episode: the logged keys still tell
            logger.warning("%s: the game's scorer failed on this episode (%s); outcome from the logged keys",
                           self.game_benchmark.game_spec.game_name, cause(e))
            scores = {"scorer_error": cause(e)}
        outcome = outcome_of(scores, interactions, self.game_master)
        main_score = math.nan if outcome == "aborted" else as_float(scores.get("Main Score"))
        return EpisodeOutcome(outcome, main_score, scores, interactions["meta"].get("round_count") or 0)

    def step(self, action):
        agent = self.agent_selection
        if agent is not None and not (self.terminations.get(agent) or self.truncations.get(agent)):
            super()._clear_rewards()  # the previous step's rewards were readable until now
        super().step(action)

    def _clear_rewards(self):
        # GameMasterEnv.step clears a step's rewards right after adding them to the cumulative
        # ones, so `rewards` always reads 0 between steps; PettingZoo keeps them until the next
        # step (api_test checks it), so that clear is skipped and step() clears them instead
        if self._keep_step_rewards:
            self._keep_step_rewards = False
            return
        super()._clear_rewards()

    def _accumulate_rewards(self):
        # GameMasterEnv.step has just set this step's rewards from clemcore's reward_func; when
        # the step ended the episode (every seat terminated), the seats' rewards are replaced
        # before they reach the cumulative rewards that last() hands out
        if self._reward is not None and self.agents and all(self.terminations[a] for a in self.agents):
            self.last_outcome = self.episode_outcome()
            for agent in self.agents:
                player = self.player_by_agent_id[agent]
                self.rewards[agent] = float(self._reward(self.last_outcome, player.name, player.game_role))
        super()._accumulate_rewards()
        self._keep_step_rewards = True


def pettingzoo_env(game: str, *, instances: Optional[str] = None, single_pass: bool = False,
                   reward: Optional[RewardFunction] = outcome_reward, callbacks=None,
                   reward_func=None, feedback_func=None, max_turns: Optional[int] = None):
    """A PettingZoo AEC env over ``game`` (a name, ``source:game`` or a folder), cycling through
    its instances file (``instances``: a stem in the game's ``in/``; None = its own file,
    ``"instances_train"`` = its training split), or going through it once (``single_pass``).
    Agents are ``player_0..n`` in the master's order; ``reset(options={"game_id": N})``
    picks an instance. An episode still running after ``max_turns`` steps ends as aborted
    with a note naming the game (None: the process's limit, ``--max-turns``; 0: none)."""
    spec = game_spec(game, instances)
    env = GameBenchmarkWrapper(OutcomeRewardEnv, game_spec=spec, callbacks=callbacks, reward=reward,
                               reward_func=reward_func, feedback_func=feedback_func, max_turns=max_turns)
    env = OrderEnforcingWrapper(env)
    return GameInstanceIteratorWrapper(env, GameInstances.from_game_spec(spec), single_pass=single_pass)


def env_agent(agent: Any, gen_args: Optional[dict] = None):
    """A seat's env agent: a model name (``programmatic``, a registered model), a clemcore
    ``Model`` or a callable ``observation -> response``."""
    if isinstance(agent, str):
        return load_model_by_name(agent, gen_args=gen_args, role="partner")
    if isinstance(agent, Model) or callable(agent):
        return agent
    raise TypeError(f"an env agent is a model name, a clemcore Model or a callable, not {type(agent).__name__}")


def check_seats(game: str, learner_agent: str, env_agents: dict, instances: Optional[str] = None):
    """Every seat of the game (``player_0..n-1``, n from its spec) played by the caller or an env
    agent, and nothing else: one clear error before anything loads (clemcore asserts later)."""
    seats = [f"player_{i}" for i in range(int(game_spec(game, instances).players))]
    wrong = [agent for agent in (learner_agent, *env_agents) if agent not in seats]
    if wrong:
        raise RolloutError(f"game '{game}' has the seats {', '.join(seats)}: no seat {', '.join(wrong)}")
    if learner_agent in env_agents:
        raise RolloutError(f"seat {learner_agent} is the learner's: give the env agents the other seats")
    empty = [seat for seat in seats if seat != learner_agent and seat not in env_agents]
    if empty:
        raise RolloutError(f"game '{game}': nobody plays {', '.join(empty)}; give each an env agent "
                           f"(e.g. {empty[0]}=programmatic, or a registered model's name)")


def gymnasium_env(game: str, *, learner_agent: str = "player_0", env_agents: Optional[dict] = None,
                  gen_args: Optional[dict] = None, **env_options):
    """A Gymnasium env in which the caller plays ``learner_agent`` and ``env_agents`` (agent id
    -> model name, clemcore ``Model`` or callable) play the other seats; ``env_options`` as for
    :func:`pettingzoo_env`. An observation is the newest message only: keep the history."""
    check_seats(game, learner_agent, env_agents or {}, env_options.get("instances"))
    agents = {agent_id: env_agent(agent, gen_args) for agent_id, agent in (env_agents or {}).items()}
    return AECToGymWrapper(SinglePlayerWrapper(pettingzoo_env(game, **env_options), learner_agent,
                                               env_agents=agents))


class PlaypenGameEnvironment(ClemGameEnvironment):
    """clemcore's OpenEnv environment over :func:`gymnasium_env`: the same reset/step/state
    on the wire (clemcore's ``ClemGameEnv`` client talks to it), playpen's lookup and rewards."""

    def __init__(self, game: str, **gym_options):
        # ClemGameEnvironment.__init__ looks the game up in clemcore's registry and reads --split
        # from the hub; its reset/step/state need only these three attributes
        Environment.__init__(self)
        self._game_name = game
        self._state = ClemGameState(game_name=game, episode_id="episode_0", step_count=0, episode_count=0)
        self._game_env = gymnasium_env(game, **gym_options)


def openenv_app(game: str, *, results_dir: Optional[str] = None, run_id: Optional[str] = None, **gym_options):
    """The FastAPI app of an OpenEnv server for ``game`` (serve it with ``uvicorn``; ``playpen
    serve`` does), with the endpoints of ``clem serve``: ``/reset``, ``/step``, ``/state``,
    ``/health``, ``/schema``, ``/ws``. ``results_dir``: every episode is written there in
    clemcore's results layout, under ``run_id`` (default: the env agents' names, as clem serve)."""
    if results_dir is not None:
        names = [a if isinstance(a, str) else getattr(a, "name", "callable")
                 for a in (gym_options.get("env_agents") or {}).values()]
        gym_options["callbacks"] = clemgame().episode_results_folder_callbacks(
            run_dir=run_id or "-".join(names) or "run", result_dir_path=str(results_dir))
    environment = PlaypenGameEnvironment(game, **gym_options)
    return create_app(lambda: environment, ClemGameAction, ClemGameObservation, env_name="clem_env")
