"""Preference pairs from games: two learner turns in the same context, one that led to a
better outcome (chosen) and one that led to a worse one (rejected).

Two sources, one record format:

- **recorded play** (:func:`recorded_pairs`): episodes of the same instance (game,
  experiment, game_id) and role, by different models or runs — any clemcore results
  folder, 2.x clembench-runs or 3.x records (see :mod:`playpen.data`). Chosen comes from
  a won episode, rejected from a lost or aborted one, at the first turn where the two
  conversations part: every message before it is the same in both (the shared prompt),
  and both differ in the player's own turn there. A conversation that parts at a
  message from the game (the partner or the game answered differently) gives no pair.
- **branching** (:func:`branch_pairs`): episodes forked at a learner turn by the rollout
  engine (:class:`playpen.rollouts.Branching`) and finished by the partner. Siblings
  share the learner's token sequence up to the fork exactly, so a pair carries token
  ids (``prompt_ids``, ``chosen_ids``, ``rejected_ids``): the ids the model saw and
  generated, never re-tokenised text. Branches are ranked by the forked player's reward;
  every two branches with different rewards give a pair (the better one chosen); ties,
  failed branches and branches that produced the same turn give none.

A pair record is TRL's conversational preference format with an explicit prompt —
``{"prompt": [messages], "chosen": [{"role": "assistant", ...}], "rejected": [...]}`` —
plus ``meta`` (where it came from) and, for branch pairs, the token ids.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from playpen.data import DatasetFilter, conversational_records, role_key
from playpen.errors import DatasetError
from playpen.files import read_json_rows, write_jsonl

WON = ("success",)
NOT_WON = ("failure", "aborted")


@dataclass(frozen=True)
class PreferencePair:
    """A shared prompt, the better turn and the worse turn after it."""

    prompt: tuple[dict, ...]
    chosen: str
    rejected: str
    meta: Mapping[str, Any] = field(default_factory=dict)
    prompt_ids: tuple[int, ...] = ()
    chosen_ids: tuple[int, ...] = ()
    rejected_ids: tuple[int, ...] = ()

    @property
    def has_ids(self) -> bool:
        return bool(self.prompt_ids and self.chosen_ids and self.rejected_ids)

    def to_record(self) -> dict:
        """TRL's conversational preference format (+ ``meta`` and the ids when known)."""
        record = {"prompt": [dict(m) for m in self.prompt],
                  "chosen": [{"role": "assistant", "content": self.chosen}],
                  "rejected": [{"role": "assistant", "content": self.rejected}],
                  "meta": dict(self.meta)}
        if self.has_ids:
            record.update(prompt_ids=list(self.prompt_ids), chosen_ids=list(self.chosen_ids),
                          rejected_ids=list(self.rejected_ids))
        return record

    @classmethod
    def from_record(cls, record: Mapping, where: str = "pair") -> "PreferencePair":
        """The inverse of :meth:`to_record`; DatasetError naming `where` when malformed."""
        if not isinstance(record, Mapping):
            raise DatasetError(f"{where}: not an object with prompt, chosen and rejected")
        prompt, chosen, rejected = record.get("prompt"), record.get("chosen"), record.get("rejected")
        if not (isinstance(prompt, list) and prompt and all(_is_message(m) for m in prompt)):
            raise DatasetError(f"{where}: 'prompt' must be a non-empty list of {{role, content}} messages")
        texts = []
        for name, value in (("chosen", chosen), ("rejected", rejected)):
            if isinstance(value, list) and len(value) == 1 and _is_message(value[0]) \
                    and value[0]["role"] == "assistant":
                texts.append(value[0]["content"])
            elif isinstance(value, str):
                texts.append(value)
            else:
                raise DatasetError(f"{where}: '{name}' must be one assistant message "
                                   f"([{{\"role\": \"assistant\", \"content\": ...}}])")
        ids = [tuple(int(i) for i in record.get(k) or ()) for k in ("prompt_ids", "chosen_ids", "rejected_ids")]
        return cls(tuple({"role": m["role"], "content": m["content"]} for m in prompt), texts[0], texts[1],
                   dict(record.get("meta") or {}), *ids)


def _is_message(m: Any) -> bool:
    return isinstance(m, Mapping) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)


# ----------------------------------------------------------------------------- recorded play

def _instance_key(meta: Mapping) -> tuple:
    return (meta.get("game"), meta.get("experiment"), meta.get("game_id"), role_key(meta.get("game_role", "")),
            meta.get("player_name"), meta.get("side_call"))


def divergence(a: Sequence[dict], b: Sequence[dict]) -> Optional[int]:
    """Index of the first message where two conversations differ; None when one is a
    prefix of the other (they never part)."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x["role"] != y["role"] or x["content"] != y["content"]:
            return i
    return None


def recorded_pairs(records: Iterable[dict], *, won: Sequence[str] = WON,
                   not_won: Sequence[str] = NOT_WON) -> list[PreferencePair]:
    """Pairs from conversational records (``{messages, meta}``, see :mod:`playpen.data`):
    for every won and every lost/aborted record of the same instance and role, the first
    turn where their conversations part, when it is the player's own turn in both.
    Duplicates (same prompt, chosen and rejected) are dropped."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for record in records:
        groups[_instance_key(record.get("meta", {}))].append(record)
    pairs, seen = [], set()
    for key in sorted(groups, key=str):
        group = groups[key]
        better = [r for r in group if r["meta"].get("outcome") in won]
        worse = [r for r in group if r["meta"].get("outcome") in not_won]
        for good in better:
            for bad in worse:
                i = divergence(good["messages"], bad["messages"])
                if i is None or i == 0 or good["messages"][i]["role"] != "assistant" \
                        or bad["messages"][i]["role"] != "assistant":
                    continue
                prompt = tuple({"role": m["role"], "content": m["content"]} for m in good["messages"][:i])
                chosen, rejected = good["messages"][i]["content"], bad["messages"][i]["content"]
                identity = (prompt_key(prompt), chosen, rejected)
                if identity in seen:
                    continue
                seen.add(identity)
                meta = {k: good["meta"].get(k) for k in ("game", "experiment", "game_id", "player_name",
                                                          "game_role")}
                meta.update(source="records", turn=sum(m["role"] == "assistant" for m in prompt),
                            chosen={k: good["meta"].get(k) for k in ("model", "outcome")},
                            rejected={k: bad["meta"].get(k) for k in ("model", "outcome")})
                pairs.append(PreferencePair(prompt, chosen, rejected, meta))
    return pairs


def prompt_key(prompt: Sequence[dict]) -> tuple:
    return tuple((m["role"], m["content"]) for m in prompt)


# ----------------------------------------------------------------------------- branching

def fork_point(group_id: str) -> Optional[tuple[str, str, int]]:
    """``(node, player_name, learner_turn)`` of a branch group id
    (``<episode>@<player>#<turn>``, see the rollout loop); None for an unforked group."""
    node, at, rest = group_id.rpartition("@")
    player, hash_, turn = rest.rpartition("#")
    if not at or not hash_ or not turn.isdigit():
        return None
    return node, player, int(turn)


def turn_span(trajectories: Sequence[Any], turn: int) -> Optional[tuple[Any, int, int, int]]:
    """Where the player's `turn`-th learner turn (0 = first, counted over the segments)
    lies: ``(trajectory, start, end, index in segment)`` with ``completion_ids[start:end]``
    its generated ids; None when the player never reached it."""
    offset = 0
    for t in sorted(trajectories, key=lambda t: t.segment):
        if turn < offset + t.num_turns:
            wanted, count, start = turn - offset, -1, None
            for i, own in enumerate(t.env_mask):
                if own and (i == 0 or not t.env_mask[i - 1]):
                    count += 1
                    if count == wanted:
                        start = i
                elif not own and start is not None:
                    return t, start, i, wanted
            return (t, start, len(t.env_mask), wanted) if start is not None else None
        offset += t.num_turns
    return None


@dataclass(frozen=True)
class _Branch:
    episode: Any
    reward: float
    prompt_ids: tuple[int, ...]
    turn_ids: tuple[int, ...]
    prompt: tuple[dict, ...]
    text: str


def _branch(episode, player: str, turn: int) -> Optional[_Branch]:
    mine = [t for t in episode.trajectories if t.player_name == player and t.side_call is None]
    span = turn_span(mine, turn)
    if span is None:
        return None
    t, start, end, index = span
    reward = float(t.reward)
    if math.isnan(reward):
        return None
    # the conversation as messages: the segment's generated turns are its last num_turns
    # assistant messages (a rewritten history may carry older ones in its first prompt)
    assistant = [i for i, m in enumerate(t.messages) if m["role"] == "assistant"]
    position = len(assistant) - t.num_turns + index
    if not 0 <= position < len(assistant):
        return None
    at = assistant[position]
    prompt = tuple({"role": m["role"], "content": m["content"]} for m in t.messages[:at])
    return _Branch(episode, reward, tuple(t.prompt_ids) + tuple(t.completion_ids[:start]),
                   tuple(t.completion_ids[start:end]), prompt, t.messages[at]["content"])


def branch_pairs(episodes: Iterable[Any]) -> list[PreferencePair]:
    """Pairs from the forks of a rollout (``RolloutResult.episodes``): per fork, every two
    branches whose forked player got different rewards, the better one chosen. Pairs carry
    the token ids; branches whose prompt ids differ (never expected) are left out."""
    forks: dict[str, list] = defaultdict(list)
    for episode in episodes:
        if fork_point(episode.group_id) is not None:
            forks[episode.group_id].append(episode)
    pairs = []
    for group_id, members in forks.items():
        _, player, turn = fork_point(group_id)
        branches = [b for b in (_branch(e, player, turn) for e in members) if b is not None]
        branches.sort(key=lambda b: -b.reward)
        for i, good in enumerate(branches):
            for bad in branches[i + 1:]:
                if good.reward <= bad.reward or good.prompt_ids != bad.prompt_ids \
                        or good.turn_ids == bad.turn_ids:
                    continue
                first = good.episode
                meta = {"source": "branching", "game": first.game, "experiment": first.experiment,
                        "game_id": first.game_id, "player_name": player,
                        "game_role": first.roles.get(player, ""), "turn": turn, "fork": group_id,
                        "chosen": _side(good), "rejected": _side(bad)}
                pairs.append(PreferencePair(good.prompt, good.text, bad.text, meta, good.prompt_ids,
                                            good.turn_ids, bad.turn_ids))
    return pairs


def _side(branch: _Branch) -> dict:
    e = branch.episode
    return {"episode": e.episode_id, "outcome": e.outcome, "reward": branch.reward,
            "main_score": None if math.isnan(e.main_score) else e.main_score}


# ----------------------------------------------------------------------------- files

def read_pairs(path: str | Path) -> list[PreferencePair]:
    """Pairs from a JSON-lines (or JSON list) file in the format of :meth:`PreferencePair.to_record`;
    DatasetError when the file is missing, malformed or holds no pair."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"pairs file '{path}' does not exist")
    rows = read_json_rows(path, DatasetError, "pairs ({prompt, chosen, rejected})")
    pairs = [PreferencePair.from_record(row, f"{path}: pair {i}") for i, row in enumerate(rows)]
    if not pairs:
        raise DatasetError(f"pairs file '{path}' holds no preference pairs (expected JSON lines of "
                           f"{{prompt, chosen, rejected}}, as `playpen dataset RESULTS --pairs` writes)")
    return pairs


def write_pairs(pairs: Sequence[PreferencePair], path: str | Path) -> Path:
    """Write pairs as JSON lines (atomically)."""
    return write_jsonl([p.to_record() for p in pairs], path)


def pairs_from_results(results_dir: str | Path, keep: DatasetFilter = DatasetFilter(), *,
                       include_programmatic: bool = False) -> tuple[list[PreferencePair], Any]:
    """Recorded-play pairs of a results folder (any layout) and the conversion report.
    The outcome filter does not apply: pairs need both won and lost episodes."""
    keep = DatasetFilter(games=keep.games, roles=keep.roles, models=keep.models)
    records, report = conversational_records(results_dir, keep, include_programmatic=include_programmatic)
    return recorded_pairs(records), report
