"""playpen's games as TRL environments: ``GRPOTrainer(environment_factory=...)``.

TRL (1.16) turns an environment's public methods into tools the policy calls while it
generates: ``reset(**row)`` starts an episode and returns text appended to the prompt's last
user message; each tool call's return value comes back to the policy as a ``tool`` message;
``get_reward()`` is read once when the rollout ends and becomes a reward column named after the
class. :class:`GameEnvironment` puts one seat of a clemcore game behind that contract: the
learner's turns are the tool :meth:`GameEnvironment.say`, the other seats are played by the
chosen partners, and the reward is the game's own outcome (:class:`playpen.envs.GameEnv`
plays the episode and scores it with the game's scorer, as ``clem score`` would).

An environment is built and reset many times (TRL keeps a pool, one per rollout of a batch),
so :func:`environment_factory` loads the game, its instances and the partner models once and
hands TRL a factory of cheap environments sharing them.

Only ``reset``, ``say`` and ``get_reward`` are public: TRL offers every other public method
as a tool.
"""
from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Union

from playpen.clem import clemcore
from playpen.envs.game import GameEnv, answer_by_own_model
from playpen.envs.loading import game_instance_rows, load_seated
from playpen.errors import RolloutError
from playpen.models import load_model_by_name
from playpen.outcomes import EpisodeOutcome
from playpen.registry import close_matches, game_spec
from playpen.rewards import OutcomeReward

PartnerSpec = Union[str, Any]  # a registered model's name, "programmatic", or a clemcore Model


@dataclass(frozen=True)
class GameSeats:
    """What every environment of one factory shares: the loaded game, its instance rows, the
    models in its player slots, and which player the learner is."""

    benchmark: Any
    rows: tuple[dict, ...]
    player_models: tuple
    learner_name: str
    learner_role: str
    reward_fn: Callable[[EpisodeOutcome, str, str], float]
    max_turns: Optional[int]

    def row(self, experiment: Optional[str], game_id: Any) -> dict:
        """The instance row named by ``experiment`` and/or ``game_id`` (a dataset's columns)."""
        found = [r for r in self.rows if (experiment is None or r["experiment"]["name"] == experiment)
                 and (game_id is None or int(r["game_instance"]["game_id"]) == int(game_id))]
        if not found:
            raise RolloutError(f"game '{self.benchmark.game_spec.game_name}' has no instance "
                               f"experiment={experiment!r} game_id={game_id!r}")
        return found[0]


def _learner_stand_in(game: str):
    """The clemcore Model in the learner's slot: TRL answers the learner's turns through
    :meth:`GameEnvironment.say`; a game master that calls this model itself inside a step (a side
    call, e.g. a probe) cannot be served from inside a tool call, and says so."""
    backends = clemcore().backends

    class LearnerSeat(backends.Model):
        def generate_response(self, messages):
            raise RolloutError(f"game '{game}' calls the learner's model inside a step (a side call): "
                               f"GameEnvironment cannot answer it; train this game with playpen's GRPO")

    return LearnerSeat(backends.ModelSpec(model_name="trl-learner", backend="trl"))


def _partner_model(partner: PartnerSpec):
    if isinstance(partner, str):
        return load_model_by_name(partner, role="partner")
    if isinstance(partner, clemcore().backends.Model):
        return partner
    raise TypeError(f"a partner is a model name ('programmatic' or a registered model) or a clemcore Model, "
                    f"not {type(partner).__name__}")


def game_seats(game: str, *, learner_role: Optional[str] = None,
               partners: Union[PartnerSpec, Mapping[str, PartnerSpec], None] = None,
               instances: Optional[str] = None, reward_fn: Optional[Callable] = None,
               max_turns: Optional[int] = None) -> GameSeats:
    """Load ``game`` and seat the learner and its partners (see :func:`environment_factory`)."""
    benchmark, rows, slots = load_seated(game, instances)
    game_name = benchmark.game_spec.game_name
    try:
        names = [n for slot in slots for n in (slot.role, slot.player_name)]
        by_seat = dict(partners) if isinstance(partners, Mapping) else {}
        for key in [*by_seat, *([learner_role] if learner_role else [])]:
            if key not in names:
                raise RolloutError(f"game '{game}' has no role or player '{key}'.{close_matches(key, names)} "
                                   f"Its roles: {', '.join(s.role for s in slots)}")
        if learner_role in by_seat:
            raise RolloutError(f"game '{game}': role '{learner_role}' is the learner's; give partners the other roles")
        learner = next((s for s in slots if learner_role in (s.role, s.player_name)) if learner_role else
                       (s for s in slots if s.role not in by_seat and s.player_name not in by_seat), None)
        if learner is None:
            raise RolloutError(f"game '{game}': every role has a partner; name the learner's role (learner_role)")
        models = [None] * int(benchmark.game_spec.players)
        models[learner.index] = _learner_stand_in(game_name)
        for slot in slots:
            if slot is learner:
                continue
            partner = by_seat.get(slot.role, by_seat.get(slot.player_name))
            if partner is None and not isinstance(partners, Mapping):
                partner = partners
            if partner is None:
                raise RolloutError(f"game '{game}': nobody plays role '{slot.role}' ({slot.player_name}); "
                                   f"pass partners={{'{slot.role}': 'programmatic'}} or a registered model's name")
            models[slot.index] = _partner_model(partner)
        # a slot the master never fills (the game builds that player itself) still needs a model
        models = [m if m is not None else _learner_stand_in(game_name) for m in models]
    except BaseException:
        benchmark.close()
        raise
    return GameSeats(benchmark, tuple(rows), tuple(models), learner.player_name, learner.role,
                     reward_fn or OutcomeReward(), max_turns)


class GameEnvironment:
    """One seat of a clemcore game, for TRL's ``environment_factory``: the policy plays the
    learner's role by calling :meth:`say`; the other roles answer by their partners' models
    (programmatic players by the game's own code), the players a game builds itself by theirs.

    ``reset(**row)`` plays the instance a dataset row names (columns ``experiment`` and/or
    ``game_id``), else the next instance of the file in turn. An episode the policy leaves
    unfinished (it stops calling :meth:`say`, or TRL's ``max_tool_calling_iterations`` ends it) is
    rewarded as aborted.
    """

    def __init__(self, seats: GameSeats):
        self._seats = seats
        self._env = GameEnv(seats.benchmark, list(seats.player_models), reward_fn=seats.reward_fn,
                            results_folder="trl", max_turns=seats.max_turns)
        self._order = itertools.cycle(seats.rows)

    def reset(self, experiment: Optional[str] = None, game_id: Optional[int] = None, **row) -> str:
        """Start an episode; the text is the learner's first prompt (its memory and first context)."""
        chosen = next(self._order) if experiment is None and game_id is None else self._seats.row(experiment, game_id)
        self._env.reset(chosen)
        return self._play_partners(first=True)

    def say(self, text: str) -> str:
        """Say your next turn in the game.

        Args:
            text: Your reply to the game master's last message, in the format it asked for.

        Returns:
            The game master's next message to you, or how the game ended.
        """
        if self._env.game_master is None or self._env.done:
            raise RuntimeError("the game is over: no more turns")
        if self._env.observe().player_name != self._seats.learner_name:
            raise RuntimeError("it is not your turn")
        self._env.step(str(text))
        return self._play_partners()

    def get_reward(self) -> float:
        """The learner's reward for the episode: the game's outcome through ``reward_fn``."""
        if self._env.done:
            return float(self._env.last_result.rewards[self._seats.learner_name])
        turns = len(self._env.interactions["turns"]) if self._env.game_master is not None else 0
        unfinished = EpisodeOutcome("aborted", math.nan, {"Aborted": 1}, turns)
        return float(self._seats.reward_fn(unfinished, self._seats.learner_name, self._seats.learner_role))

    def _play_partners(self, first: bool = False) -> str:
        """Step the game until the learner's turn or the end (the outcome). The learner is shown
        its new context; on its first turn its memory too (a game's initial prompt)."""
        while not self._env.done:
            player, context = observation = self._env.observe()
            if player.name == self._seats.learner_name:
                return "\n\n".join(_text(m) for m in (observation.messages if first else [context]))
            self._env.step(answer_by_own_model(player, context, observation.messages))
        result = self._env.last_result
        return f"The game is over: {result.outcome}."


def _text(message: dict) -> str:
    content = message.get("content", "")
    return content if isinstance(content, str) else str(content)


def environment_factory(game: str, learner_role: Optional[str] = None,
                        partners: Union[PartnerSpec, Mapping[str, PartnerSpec], None] = None, *,
                        instances: Optional[str] = None, reward_fn: Optional[Callable] = None,
                        max_turns: Optional[int] = None) -> Callable[[], GameEnvironment]:
    """A factory for ``GRPOTrainer(environment_factory=...)`` over ``game`` (a registered name,
    ``source:game`` or a folder, as ``playpen list games`` shows them).

    Args:
        learner_role: the role (or player name) the policy plays; None: the first one without
            a partner.
        partners: role or player name -> partner, or one partner for every other role; a partner
            is ``"programmatic"`` (the game's own scripted player), a registered model's name, or
            a clemcore ``Model``. Loaded once, shared by every environment.
        instances: a stem in the game's ``in/`` folder (``"instances_train"``); None: its own file.
        reward_fn: ``(EpisodeOutcome, player_name, role) -> float``; default
            :class:`playpen.rewards.OutcomeReward`.
        max_turns: an episode still running after this many turns ends as aborted (None: the
            game's own limit, 0: none).
    """
    seats = game_seats(game, learner_role=learner_role, partners=partners, instances=instances,
                       reward_fn=reward_fn, max_turns=max_turns)
    return functools.partial(GameEnvironment, seats)


def instance_rows(game: str, instances: Optional[str] = None) -> list[dict]:
    """One dataset row per instance of ``game`` (``prompt`` empty: :meth:`GameEnvironment.reset`
    supplies it; ``experiment``, ``game_id``): TRL repeats each row ``num_generations`` times, so a
    GRPO group plays one instance. ``datasets.Dataset.from_list`` takes the list."""
    return [{"prompt": [{"role": "user", "content": ""}], "experiment": row["experiment"]["name"],
             "game_id": int(row["game_instance"]["game_id"])} for row in game_instance_rows(game_spec(game, instances))]
