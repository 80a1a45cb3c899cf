"""Rubrics: per-player rewards composed from the game outcome, episode scores,
programmatic checks and LLM judges.

A :class:`Rubric` is a weighted list of terms for one game. Each term gives every player
it applies to (all roles, or the roles it names) a number; a player's reward is the
weighted sum of its terms::

    rubric = Rubric("negotiation", [
        Weighted(OutcomeTerm(), 0.2),                       # aborted -1 .. success 1
        Weighted(ScoreTerm("{role} Points", scale=10), 1.0),  # the player's own share, 0..1
        Weighted(JudgeTerm(judge), 0.3, roles=("Negotiator A",)),  # a model grades A's last move
    ])
    scored = rubric.score(result.episodes)      # RubricScores: per episode, per player
    result = rubric.apply(result)               # the same RolloutResult, rewards replaced

Terms:

- :class:`OutcomeTerm` — any playpen reward function of the outcome
  (:class:`playpen.rewards.OutcomeReward` by default);
- :class:`RewardTerm` — the reward the rollout already gave the player (the game's, or
  in a hierarchy the task's: a proposer's ``1 - |2 r - 1|``), to add checks or judges to it;
- :class:`ScoreTerm` — an episode score the game logs, ``{role}``/``{player}`` filled in
  (``"{role} Wins"`` in debate, ``"Improvement"`` in refine), divided by ``scale``;
- :class:`CheckTerm` — any programmatic check ``(episode, player_name, role) -> float``;
  :class:`RegexCheck` and :class:`LengthCheck` ship;
- :class:`JudgeTerm` — a judge of :mod:`playpen.training.rubrics.judging` (any registered model,
  a Jinja prompt, a regex that reads the verdict) grades the player's last turn or all of
  its turns; the score is mapped to 0..1 over the judge's range.

Judge calls of one :meth:`Rubric.score` call are collected over all episodes and sent per
judge in one batch (a local model generates in batches, a remote one is called
concurrently); a call that fails is retried (``retries``, with a pause), a reply without a
verdict is asked again ``reask`` times, then counted as unparsable, logged (warning, and
one JSON line in ``log_file`` when given) and the term gives ``missing``. Judge prompts and
replies never become training data: a term returns a number, nothing else.

A rubric file (JSON) describes the same for the trainers and is checked before anything
loads (:mod:`playpen.training.rubrics.files`). See docs/rubrics.md.

Longer than 400 lines because every rubric term kind and the judge calls they share are read together.
"""
from __future__ import annotations

import json
import logging
import math
import re
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from playpen.errors import JudgeError, PartnerError, RubricError
from playpen.outcomes import EpisodeOutcome
from playpen.registry import resolve_game
from playpen.rewards import OutcomeReward, RewardFunction
from playpen.training.rubrics.judging import JudgeRequest

logger = logging.getLogger("playpen.rubrics")

SCOPES = ("last_turn", "all_turns")


# ----------------------------------------------------------------------------- terms

@dataclass(frozen=True)
class OutcomeTerm:
    """A reward function of the outcome, e.g. :class:`~playpen.rewards.OutcomeReward`."""

    reward: RewardFunction = OutcomeReward()
    name: str = "outcome"

    def value(self, episode: Any, player_name: str, role: str) -> float:
        return float(self.reward(outcome_of_episode(episode), player_name, role))


@dataclass(frozen=True)
class RewardTerm:
    """The reward the rollout gave the player (``episode.rewards``: the game's reward
    function, or in a hierarchy the task's reward of a parent); `missing` when the episode
    has none for the player. NaN (unscored, e.g. a proposer none of whose solvers could
    play) stays NaN, so the player stays out of every mean and baseline."""

    missing: float = 0.0
    name: str = "reward"

    def value(self, episode: Any, player_name: str, role: str) -> float:
        rewards = getattr(episode, "rewards", None) or {}
        return float(rewards[player_name]) if player_name in rewards else self.missing


@dataclass(frozen=True)
class ScoreTerm:
    """An episode score divided by `scale`; `key` may name ``{role}`` or ``{player}``.
    A score the episode lacks, or NaN (an aborted episode), gives `missing`."""

    key: str
    scale: float = 1.0
    missing: float = 0.0

    @property
    def name(self) -> str:
        return f"score:{self.key}"

    def value(self, episode: Any, player_name: str, role: str) -> float:
        raw = (episode.episode_scores or {}).get(self.key.format(role=role, player=player_name))
        try:
            number = float(raw)
        except (TypeError, ValueError):
            return self.missing
        return self.missing if math.isnan(number) else number / self.scale


@dataclass(frozen=True)
class CheckTerm:
    """Any programmatic check of a finished episode: ``fn(episode, player_name, role)``.
    Exceptions are not caught: a broken check stops the run with its traceback."""

    fn: Callable[[Any, str, str], float]
    name: str = "check"

    def value(self, episode: Any, player_name: str, role: str) -> float:
        return float(self.fn(episode, player_name, role))


@dataclass(frozen=True)
class RegexCheck:
    """The share of the player's turns that match `pattern` (re.search); `missing` when it
    had no turn."""

    pattern: str
    missing: float = 0.0

    def __call__(self, episode: Any, player_name: str, role: str) -> float:
        replies = [t.response for t in player_turns(episode, player_name)]
        if not replies:
            return self.missing
        compiled = re.compile(self.pattern)
        return sum(compiled.search(r) is not None for r in replies) / len(replies)


@dataclass(frozen=True)
class LengthCheck:
    """The share of the player's turns of at most `max_chars` characters."""

    max_chars: int
    missing: float = 0.0

    def __call__(self, episode: Any, player_name: str, role: str) -> float:
        replies = [t.response for t in player_turns(episode, player_name)]
        return sum(len(r) <= self.max_chars for r in replies) / len(replies) if replies else self.missing


@dataclass(frozen=True)
class JudgeTerm:
    """A judge grades the player's turns: ``last_turn`` (its last reply, with everything it
    was shown before) or ``all_turns`` (all its replies as one candidate). The verdict is
    mapped to 0..1 over the judge's score range; no turn or no verdict gives `missing`."""

    judge: Any  # playpen.training.rubrics.judging.Judge
    scope: str = "last_turn"
    missing: float = 0.0

    def __post_init__(self):
        if self.scope not in SCOPES:
            raise RubricError(f"judge term: scope '{self.scope}' is not one of {', '.join(SCOPES)}")

    @property
    def name(self) -> str:
        return f"judge:{self.judge.name}"

    def request(self, episode: Any, player_name: str, role: str):
        """The judge request for one player of one episode; None when it had no turn."""
        turns = player_turns(episode, player_name)
        if not turns:
            return None
        if self.scope == "all_turns":
            candidate = "\n\n".join(t.response for t in turns)
            return JudgeRequest(({"role": "user", "content": turns[0].context},), candidate, episode.game, role,
                                len(turns) - 1)
        conversation = []
        for turn in turns[:-1]:
            conversation += [{"role": "user", "content": turn.context}, {"role": "assistant", "content": turn.response}]
        conversation.append({"role": "user", "content": turns[-1].context})
        return JudgeRequest(tuple(conversation), turns[-1].response, episode.game, role, len(turns) - 1)

    def normalise(self, score: Optional[float]) -> float:
        if score is None:
            return self.missing
        low, high = self.judge.spec.low, self.judge.spec.high
        return (score - low) / (high - low)


Term = Union[OutcomeTerm, RewardTerm, ScoreTerm, CheckTerm, JudgeTerm]


@dataclass(frozen=True)
class Weighted:
    """A term with its weight and the roles it applies to (None: every role)."""

    term: Term
    weight: float = 1.0
    roles: Optional[tuple[str, ...]] = None

    def applies_to(self, role: str) -> bool:
        return self.roles is None or role in self.roles


def player_turns(episode: Any, player_name: str) -> list:
    return [t for t in episode.turns if t.player_name == player_name]


def outcome_of_episode(episode: Any) -> EpisodeOutcome:
    outcome = episode.outcome if episode.outcome in ("success", "failure", "aborted") else "aborted"
    return EpisodeOutcome(outcome, episode.main_score, dict(episode.episode_scores or {}), episode.num_turns)


# ----------------------------------------------------------------------------- results

@dataclass(frozen=True)
class PlayerReward:
    """One player's reward and what each term contributed (unweighted values)."""

    player_name: str
    role: str
    reward: float
    components: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class RubricScores:
    """Per episode (in the order given): player name -> :class:`PlayerReward`; and counts."""

    rewards: tuple[Mapping[str, PlayerReward], ...]
    judge_requests: int = 0
    judge_unparsable: int = 0
    judge_retries: int = 0

    def metrics(self) -> dict[str, float]:
        """``rubric/*`` metrics: judge counts and the mean reward per role."""
        out = {"rubric/judge_requests": self.judge_requests, "rubric/judge_unparsable": self.judge_unparsable,
               "rubric/judge_retries": self.judge_retries}
        by_role: dict[str, list[float]] = {}
        for episode in self.rewards:
            for reward in episode.values():
                by_role.setdefault(reward.role, []).append(reward.reward)
        for role, values in by_role.items():
            out[f"rubric/reward/{role}"] = sum(values) / len(values)
        return out


# ----------------------------------------------------------------------------- the rubric

class Rubric:
    """Weighted terms for one game's players (see the module docstring).

    `roles`: the game's roles, to check that every term names real ones (default: read
    from the game's clemgame.json through playpen's registry; pass them for a game that is
    not registered). `retries`: attempts after a judge call fails; `reask`: times a reply
    without a verdict is asked again; `log_file`: JSON lines of unparsable replies.
    """

    def __init__(self, game: str, terms: Sequence[Weighted], *, roles: Optional[Sequence[str]] = None,
                 retries: int = 2, reask: int = 0, retry_pause_s: float = 2.0,
                 log_file: Optional[Union[str, Path]] = None):
        self.game = game
        self.terms = [t if isinstance(t, Weighted) else Weighted(t) for t in terms]
        self.roles = tuple(roles) if roles is not None else game_roles(game)
        self.retries, self.reask, self.retry_pause_s = int(retries), int(reask), float(retry_pause_s)
        self.log_file = Path(log_file) if log_file else None
        self.last_scores: Optional[RubricScores] = None  # of the last apply() call
        if not self.terms:
            raise RubricError(f"rubric for game '{game}': no terms")
        for number, weighted in enumerate(self.terms, start=1):
            if not isinstance(weighted.weight, (int, float)) or not math.isfinite(weighted.weight):
                raise RubricError(f"rubric for game '{game}': term {number} ({weighted.term.name}): weight "
                                  f"{weighted.weight!r} is not a finite number")
            for role in weighted.roles or ():
                if role not in self.roles:
                    raise RubricError(f"rubric for game '{game}': term {number} ({weighted.term.name}) names role "
                                      f"'{role}', which the game does not have (its roles: {', '.join(self.roles)})")

    @property
    def needs_turns(self) -> bool:
        """Whether a term reads more than the outcome (checks, judges: the turns; the
        rollout's reward): then only :meth:`score` / :meth:`apply` work, not the
        reward-function form."""
        return any(isinstance(w.term, (CheckTerm, JudgeTerm, RewardTerm)) for w in self.terms)

    def reward_function(self) -> RewardFunction:
        """The rubric as a rollout ``reward_fn`` ``(outcome, player_name, role)`` — for
        rubrics of outcome and score terms only (they need no turns and no judge)."""
        if self.needs_turns:
            raise RubricError(f"rubric for game '{self.game}' has check, judge or reward terms, which need the whole "
                              f"episode: score the rollout with Rubric.apply(result) instead")

        def reward(outcome: EpisodeOutcome, player_name: str = "", role: str = "") -> float:
            return sum(w.weight * w.term.value(outcome, player_name, role) for w in self.terms if w.applies_to(role))
        return reward

    def score(self, episodes: Sequence[Any], policy: Any = None) -> RubricScores:
        """Every player's reward in every episode (:class:`~playpen.rollouts.types.EpisodeResult`
        or anything with the same fields). `policy`: the learner's model when a judge is the
        learner itself (``--judge learner``)."""
        episodes = list(episodes)
        values: dict[tuple[int, int, str], float] = {}  # (episode, term, player) -> value
        pending: dict[int, list[tuple[tuple[int, int, str], Any]]] = {}  # id(judge) -> keyed requests
        judges: dict[int, Any] = {}
        for e, episode in enumerate(episodes):
            if episode.game != self.game and episode.game.rpartition(":")[2] != self.game:
                raise RubricError(f"rubric for game '{self.game}' cannot score an episode of '{episode.game}'")
            for t, weighted in enumerate(self.terms):
                for player, role in episode.roles.items():
                    if not weighted.applies_to(role):
                        continue
                    if isinstance(weighted.term, JudgeTerm):
                        request = weighted.term.request(episode, player, role)
                        if request is None:
                            values[(e, t, player)] = weighted.term.missing
                        else:
                            judges[id(weighted.term.judge)] = weighted.term.judge
                            pending.setdefault(id(weighted.term.judge), []).append(((e, t, player), request))
                    else:
                        values[(e, t, player)] = weighted.term.value(episode, player, role)
        asked = unparsable = retries = 0
        for key, items in pending.items():
            verdicts, used = self._ask(judges[key], [r for _, r in items], policy)
            asked, retries = asked + len(items), retries + used
            for ((e, t, player), request), verdict in zip(items, verdicts):
                term = self.terms[t].term
                values[(e, t, player)] = term.normalise(verdict.score)
                if verdict.score is None:
                    unparsable += 1
                    self._log_unparsable(judges[key], episodes[e], player, request.role, verdict.reply)
        if unparsable:
            logger.warning("rubric for %s: %d of %d judge replies gave no verdict (counted as 'missing')%s",
                           self.game, unparsable, asked, f"; logged in {self.log_file}" if self.log_file else "")
        rewards = []
        for e, episode in enumerate(episodes):
            per_player = {}
            for player, role in episode.roles.items():
                components, total = {}, 0.0
                for t, weighted in enumerate(self.terms):
                    if (e, t, player) in values:
                        name = weighted.term.name if weighted.term.name not in components else f"{weighted.term.name}#{t}"
                        components[name] = values[(e, t, player)]
                        total += weighted.weight * values[(e, t, player)]
                per_player[player] = PlayerReward(player, role, total, components)
            rewards.append(per_player)
        return RubricScores(tuple(rewards), asked, unparsable, retries)

    def apply(self, result: Any, policy: Any = None) -> Any:
        """`result` (a :class:`~playpen.rollouts.types.RolloutResult`) with every episode's
        and trajectory's reward replaced by the rubric's; episodes of other games keep theirs."""
        mine = [e for e in result.episodes if e.game == self.game or e.game.rpartition(":")[2] == self.game]
        self.last_scores = self.score(mine, policy)
        scored = dict(zip((e.episode_id for e in mine), self.last_scores.rewards))
        episodes = []
        for episode in result.episodes:
            if episode.episode_id not in scored:
                episodes.append(episode)
                continue
            rewards = {player: r.reward for player, r in scored[episode.episode_id].items()}
            trajectories = tuple(replace(t, reward=rewards.get(t.player_name, t.reward)) for t in episode.trajectories)
            episodes.append(replace(episode, rewards=rewards, trajectories=trajectories))
        return replace(result, episodes=tuple(episodes))

    def _ask(self, judge: Any, requests: list, policy: Any) -> tuple[list, int]:
        """Verdicts for `requests` in one batch per attempt; returns (verdicts, retries used)."""
        verdicts: list = [None] * len(requests)
        todo, failures, reasks = list(range(len(requests))), 0, 0
        while todo:
            try:
                got = judge.verdicts([requests[i] for i in todo], policy=policy)
            except (JudgeError, PartnerError) as e:
                failures += 1
                if failures > self.retries:
                    raise JudgeError(f"rubric for game '{self.game}': judge '{judge.name}' failed "
                                     f"{failures} times; last: {e}") from e
                logger.warning("rubric for %s: judge '%s' failed (%s); retrying in %.0f s", self.game, judge.name,
                               e, self.retry_pause_s)
                time.sleep(self.retry_pause_s)
                continue
            for i, verdict in zip(todo, got):
                verdicts[i] = verdict
            todo = [i for i in todo if verdicts[i].score is None]
            if not todo or reasks >= self.reask:
                break
            reasks += 1
        return verdicts, failures + reasks

    def _log_unparsable(self, judge: Any, episode: Any, player: str, role: str, reply: str) -> None:
        if self.log_file is None:
            return
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "a", encoding="utf-8") as f:
            f.write(json.dumps({"event": "judge_unparsable", "judge": judge.name, "game": episode.game,
                                "episode_id": episode.episode_id, "player": player, "role": role,
                                "reply": reply}) + "\n")


def game_roles(game: str) -> tuple[str, ...]:
    """The roles a game's clemgame.json declares (through playpen's game registry)."""
    roles = resolve_game(game).spec.get("roles")
    if not roles:
        raise RubricError(f"game '{game}' declares no roles in its clemgame.json: pass roles= to the rubric")
    return tuple(roles)
