"""A per-episode limit on turns: an episode still running after ``max_turns`` steps ends as
aborted, with a note in its interactions naming the limit.

A game whose round ends only on a valid move never ends with a model that never finds the
format: ``playpen eval`` once ran 9.5 minutes on one such episode, each turn slower as the
prompt grew. By default each game takes its own limit, ``"max_turns"`` in its
``clemgame.json`` spec, where it declares one, and :data:`DEFAULT_MAX_TURNS` (far above the
longest clembench episodes) where it does not; a limit set per process (``playpen eval
--max-turns``, ``playpen run --max-turns``) or per call (``rollout(max_turns=...)``,
``pettingzoo_env(max_turns=...)``, ``playpen serve --max-turns``) applies to every game;
0 turns it off.

The limit lives in the game master itself (:func:`limit_turns`), so that clemcore's runners
(``playpen eval`` plays through them) and playpen's rollout loop end such episodes alike.
"""
from __future__ import annotations

import contextlib
import sys
from typing import Any, Optional

from playpen.errors import PlaypenError

DEFAULT_MAX_TURNS = 200
"""Steps (player turns) an episode of a game that declares no limit may take; clembench's
longest episodes take well under 100."""

MAX_TURNS_HELP = ("An episode still running after this many turns (player steps) ends as aborted, with a note "
                  "naming the game (a game that never ends with this model); 0: no limit. Default: the game's own "
                  "limit (\"max_turns\" in its clemgame.json), else 200. A turn is one generation of up to -L tokens "
                  "over a prompt that grows every turn: with smol-135m on a CPU about 1-10 s, so 200 turns can hold "
                  "one episode for half an hour.")

_max_turns: Optional[int] = None  # None: each game's own limit
_said: set[str] = set()


def check_max_turns(limit: Optional[int]) -> None:
    """A PlaypenError for a limit that is no integer >= 0 (before any model loads); None
    (each game's own limit) is fine."""
    if limit is not None and (type(limit) is not int or limit < 0):
        raise PlaypenError(f"option --max-turns: {limit!r} is not valid; expected an integer >= 0 (0: no limit)")


def set_max_turns(limit: Optional[int]) -> None:
    """The limit of every episode played from now on in this process (0: none; None: each
    game's own)."""
    global _max_turns
    check_max_turns(limit)
    _max_turns = limit


@contextlib.contextmanager
def turn_limit(limit: Optional[int]):
    """:func:`set_max_turns` for the duration of a command (the earlier limit restored after)."""
    before = _max_turns
    set_max_turns(limit)
    try:
        yield
    finally:
        set_max_turns(before)


def max_turns(limit: Optional[int] = None) -> Optional[int]:
    """``limit``, or the process's limit when None (None again: each game's own)."""
    return _max_turns if limit is None else limit


def game_turn_limit(game_spec: Any, limit: Optional[int] = None) -> int:
    """The limit of an episode of the game of ``game_spec``: ``limit`` or the process's, else
    the ``"max_turns"`` its spec declares (an integer >= 1), else :data:`DEFAULT_MAX_TURNS`."""
    limit = max_turns(limit)
    if limit is not None:
        return limit
    declared = getattr(game_spec, "max_turns", None)
    return declared if type(declared) is int and declared >= 1 else DEFAULT_MAX_TURNS


def limit_turns(master: Any, limit: Optional[int] = None) -> Any:
    """Make ``master`` end its episode as aborted after ``limit`` steps (None: the process's
    limit, else the game's own, :func:`game_turn_limit`; 0: no limit). Its class becomes a
    subclass whose ``step`` counts the turns (the game's own code is untouched); returns the
    master."""
    limit = game_turn_limit(getattr(master, "game_spec", None), limit)
    if limit:
        master.__class__ = _limited_class(type(master))
        master.playpen_turn_limit, master.playpen_turns = limit, 0
    return master


def ended_by_limit(master: Any) -> bool:
    """Whether the turn limit ended ``master``'s episode."""
    return getattr(master, "playpen_limit_hit", False)


_LIMITED: dict[type, type] = {}


def _limited_class(base: type) -> type:
    """``base`` with a turn count: its ``step`` counts the turns, and its
    ``_does_game_proceed`` — which the master's own step asks before it ends the game
    (``_on_after_game``, the log's end) or prepares the next round — says no once the
    limit is reached, so that the episode ends the game's own way, as aborted."""
    if getattr(base, "_playpen_turn_limited", False):
        return base
    if base not in _LIMITED:
        def step(self, response):
            self.playpen_turns += 1
            done, info = base.step(self, response)
            if self.playpen_limit_hit:  # a legacy master logs its own outcome keys: the limit decides
                for key, value in (("Aborted", 1), ("Success", 0), ("Lose", 0)):
                    self.log_key(key, value)
            return done, info

        def _does_game_proceed(self):
            proceed = base._does_game_proceed(self)
            if proceed and self.playpen_turns >= self.playpen_turn_limit:
                _end_as_aborted(self)
                return False
            return proceed

        _LIMITED[base] = type(base.__name__, (base,), {
            "step": step, "_does_game_proceed": _does_game_proceed, "_playpen_turn_limited": True,
            "playpen_limit_hit": False, "__module__": base.__module__, "__qualname__": base.__qualname__,
            "__doc__": base.__doc__})
    return _LIMITED[base]


def _end_as_aborted(master: Any) -> None:
    """Mark ``master``'s episode as ended by the limit: a note in its log (GM to GM) and on
    stderr (once per game), and a new-API master's state aborted."""
    master.playpen_limit_hit = True
    note = (f"playpen: the episode did not end within {master.playpen_turn_limit} turns (the turn limit, "
            f"--max-turns): ended as aborted")
    game = master.game_spec.game_name
    if game not in _said:
        _said.add(game)
        where = f"{master.experiment.get('name')} {getattr(getattr(master, 'state', None), 'game_id', '')}"
        print(f"[playpen] {game}: episode {where.strip()} {note.removeprefix('playpen: ')} (said once per game)",
              file=sys.stderr, flush=True)
    master.log_to_self("turn limit", note)
    state = getattr(master, "state", None)
    if callable(getattr(state, "abort", None)):
        state.abort()


class TurnLimitedBenchmark:
    """A game's ``GameBenchmark`` whose game masters end their episodes at the turn limit
    (for clemcore's runners, which create the masters themselves)."""

    def __init__(self, benchmark: Any, limit: Optional[int] = None):
        self._benchmark, self._limit = benchmark, max_turns(limit)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._benchmark, name)

    def create_game_master(self, experiment: dict, player_models: list) -> Any:
        return limit_turns(self._benchmark.create_game_master(experiment, player_models), self._limit)
