"""How an episode ended: success, failure or aborted — one reading for live games and records.

clemcore's scorers log ``Aborted``, ``Success`` and ``Lose`` as episode scores; older
records (clembench-runs 2.x) log only some of them, or only game-master events. The
same rules serve a game just played (:mod:`playpen.envs`) and a folder of records
(:mod:`playpen.data`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

OUTCOMES = ("success", "failure", "aborted")
# game-master event types of 2.x records that tell the outcome when no score does
ABORT_EVENTS = ("invalid format", "abort game", "aborted", "abort", "invalid response")
SUCCESS_EVENTS = ("correct guess", "parse_correct", "success", "game won")


@dataclass(frozen=True)
class EpisodeOutcome:
    """How an episode ended, as a reward function sees it."""

    outcome: str  # "success" | "failure" | "aborted"
    main_score: float  # 0-100, NaN when aborted or unscored
    episode_scores: Mapping[str, Any] = field(default_factory=dict)
    num_turns: int = 0


def flag(value: Any) -> bool:
    """A score used as a flag: 1/True/"true" are set; 0, NaN, None and garbage are not."""
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes")
    try:
        return bool(value) and value == value  # NaN is not a flag
    except (TypeError, ValueError):
        return False


def outcome_of(episode_scores: Optional[Mapping[str, Any]], interactions: Mapping[str, Any],
               game_master: Any = None) -> str:
    """success / failure / aborted, from the first source that tells:

    1. the episode scores, then the keys logged in the interactions: ``Aborted`` set →
       aborted; ``Success`` set → success; ``Lose`` set → failure; ``Lose`` logged
       without ``Success`` (2.x wordle) → success; ``Success`` logged and unset → failure;
    2. the live master's ``state.outcome`` (new-API masters), when a master is given;
    3. the game master's own events (2.x records): an abort event, a success event;
    4. failure.
    """
    for source in (episode_scores or {}, interactions):
        if "Aborted" in source or "Success" in source or "Lose" in source:
            if flag(source.get("Aborted")):
                return "aborted"
            if flag(source.get("Success")):
                return "success"
            if flag(source.get("Lose")):
                return "failure"
            if "Lose" in source and "Success" not in source:
                return "success"
            if "Success" in source:
                return "failure"
            # only "Aborted": false (2.x privateshared): look further
    state = getattr(getattr(game_master, "state", None), "outcome", None)
    value = getattr(state, "value", state)
    if value in OUTCOMES:
        return value
    events = [e.get("action", {}).get("type", "") for turn in interactions.get("turns", []) for e in turn
              if isinstance(e, dict) and e.get("from") == "GM" and e.get("to") == "GM"]
    if any(t in ABORT_EVENTS for t in events):
        return "aborted"
    if any(t in SUCCESS_EVENTS for t in events):
        return "success"
    return "failure"


def as_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
