"""Results folders -> conversational datasets (one record per episode and model player).

Reads both layouts:

- clemcore 3.x (``clem run``, playpen rollouts): ``<model>/<game>/<experiment>/
  instance_NNNNN/interactions.json``; players are ``{"game_role", "model_name"}``.
- clemcore 2.x (clembench-runs v2.0): ``<m1>-t0.0--<m2>-t0.0/<game>/<i>_<experiment>/
  episode_<k>/interactions.json``; players are description strings (``"WordGuesser,
  <model>"``, ``"Answerer: <model>"``, ``"Word Guesser (<model>)"``, or a bare model
  name under the ``Player_1`` key quirk of referencegame/imagegame).

A record is ``{"messages": [{"role": "user"|"assistant", "content"}...], "meta":
{"game", "experiment", "game_id", "player_name", "game_role", "model", "outcome"}}``:
the player's view rebuilt from the events (GM ``send message`` to the player = user,
the player's ``get message`` = assistant; consecutive same-role messages joined by a
blank line, as clemcore's backends send them; trailing unanswered messages dropped).
A game master's pseudo turn (a ``get message`` labelled ``"pseudo"``: words it put in a
player's mouth, e.g. an inserted "Ok.") is never an assistant message: it is left out.
Programmatic players get no record unless ``include_programmatic=True`` (they are the
demonstrators that SFT learns from, see ``playpen.training.sft``). With ``side_calls``, each
side call that playpen's records list in ``episode.json`` (a model call the game master made
inside a step, see :mod:`playpen.rollouts.sidecalls`) is a record of its own: the messages the
game gave plus the answer, ``meta.side_call`` = its index. Malformed or partial episode
folders are skipped, and episodes that give no record counted by reason, never fatal.

Longer than 400 lines because both layouts, their quirks and the reasons an episode gives
no record are read in one place.
"""
from __future__ import annotations

import difflib
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

from playpen.errors import DatasetError
from playpen.files import read_json_rows, write_jsonl
from playpen.outcomes import OUTCOMES, outcome_of

OUTCOME_ALIASES = {"lose": "failure", "loss": "failure", "fail": "failure", "failed": "failure",
                   "abort": "aborted", "win": "success"}
PROGRAMMATIC = ("programmatic", "mock", "custom", "dry_run")
# 2.x records of these games name no roles (the Player_1 quirk): the published roles
LEGACY_ROLES = {("referencegame", "Player 1"): "Instruction Giver",
                ("referencegame", "Player 2"): "Instruction Follower",
                ("imagegame", "Player 1"): "Instruction Giver",
                ("imagegame", "Player 2"): "Instruction Follower"}



def role_key(role: str) -> str:
    """A role name as both layouts spell it: ``InstructionGiver`` (3.x records) and
    ``Instruction Giver`` (2.x) give the same key."""
    return re.sub(r"[\s_-]+", "", str(role)).lower()


@dataclass(frozen=True)
class DatasetFilter:
    """Keep records whose meta matches (empty = keep all)."""

    games: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    outcomes: tuple[str, ...] = ()

    def __post_init__(self):
        normalized = []
        for outcome in self.outcomes:
            value = OUTCOME_ALIASES.get(outcome.lower(), outcome.lower())
            if value not in OUTCOMES:
                raise DatasetError(f"unknown outcome '{outcome}': choose from {', '.join(OUTCOMES)} "
                                   f"(or lose/abort)")
            normalized.append(value)
        object.__setattr__(self, "outcomes", tuple(normalized))

    def keeps(self, meta: dict) -> bool:
        return ((not self.games or meta.get("game") in self.games)
                and (not self.roles or role_key(meta.get("game_role", "")) in {role_key(r) for r in self.roles}
                     or meta.get("player_name") in self.roles)
                and (not self.models or meta.get("model") in self.models)
                and (not self.outcomes or meta.get("outcome") in self.outcomes))


@dataclass(frozen=True)
class ConversionReport:
    """What a conversion read, wrote and skipped."""

    num_episodes: int
    num_records: int
    skipped: tuple[tuple[str, str], ...] = ()  # (folder, reason)
    num_filtered_out: int = 0
    no_record: tuple[tuple[str, str], ...] = ()  # (folder, why): read fine, but no record

    @property
    def num_skipped(self) -> int:
        return len(self.skipped)

    def lines(self, max_paths: int = 3) -> list[str]:
        out = [f"{self.num_records} records from {self.num_episodes} episodes"
               + (f" ({self.num_filtered_out} records filtered out)" if self.num_filtered_out else "")]
        if self.skipped:
            out.append(f"skipped {self.num_skipped} malformed or partial episode folder(s), e.g.:")
            out += [f"  {path}: {reason}" for path, reason in self.skipped[:max_paths]]
        if self.no_record:
            reasons = Counter(reason for _, reason in self.no_record)
            out.append(f"{len(self.no_record)} episode(s) gave no record: "
                       + "; ".join(f"{n} {reason}" for reason, n in reasons.most_common())
                       + f" (e.g. {self.no_record[0][0]})")
        return out


@dataclass
class _Episode:
    folder: Path
    interactions: dict
    scores: Optional[dict] = None
    instance: Optional[dict] = None


class _Skip(Exception):
    """An episode folder that cannot be converted (reason in the message)."""


# ----------------------------------------------------------------------------- reading

def episode_folders(results_dir: Path) -> Iterator[Path]:
    """Folders that hold (or should hold) one episode: those with an interactions.json,
    and ``instance_*``/``episode_*`` folders without one (partial episodes)."""
    seen = set()
    for path in sorted(Path(results_dir).rglob("interactions.json")):
        if _hidden(path.parent, results_dir):
            continue
        seen.add(path.parent)
        yield path.parent
    for pattern in ("instance_*", "episode_*"):
        for path in sorted(Path(results_dir).rglob(pattern)):
            if path.is_dir() and path not in seen and not _hidden(path, results_dir):
                seen.add(path)
                yield path


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))  # accepts the bare NaN of old scores
    except (OSError, UnicodeDecodeError) as e:
        raise _Skip(f"cannot read {path.name}: {e}") from e
    except json.JSONDecodeError as e:
        raise _Skip(f"malformed {path.name} (line {e.lineno}: {e.msg})") from e


def _load(folder: Path) -> _Episode:
    file = folder / "interactions.json"
    if not file.exists():
        if (folder / "error.json").exists():
            raise _Skip("the episode failed (error.json, no interactions.json)")
        raise _Skip("no interactions.json (partial episode)")
    interactions = _read_json(file)
    if not isinstance(interactions, dict) or not isinstance(interactions.get("players"), dict) \
            or not isinstance(interactions.get("turns"), list):
        raise _Skip("interactions.json lacks 'players' or 'turns'")
    for i, turn in enumerate(interactions["turns"]):
        if not isinstance(turn, list) or not all(isinstance(e, dict) and isinstance(e.get("action", {}), dict)
                                                 for e in turn):
            raise _Skip(f"interactions.json: turn {i} is not a list of events {{from, to, action{{type, content}}}}")
    return _Episode(folder, interactions, _optional_json(folder / "scores.json"),
                    _optional_json(folder / "instance.json"))


def _optional_json(path: Path) -> Any:
    """A file beside interactions.json; None when missing or unreadable (the interactions
    still hold the episode)."""
    try:
        return _read_json(path) if path.exists() else None
    except _Skip:
        return None


# ----------------------------------------------------------------------------- meta

def _players(episode: _Episode, game: str, include_programmatic: bool = False) -> list[tuple[str, str, str]]:
    """(player name as in events, role, model) of the players; programmatic ones only
    with ``include_programmatic``."""
    out = []
    model_names = _models_from_folder(episode)
    for key, value in episode.interactions["players"].items():
        if key == "GM":
            continue
        name = key.replace("_", " ")  # 2.x quirk: "Player_1" in players, "Player 1" in events
        if isinstance(value, dict):  # 3.x
            role, model = value.get("game_role") or name, value.get("model_name") or ""
        else:
            role, model = _parse_description(str(value), game, name, model_names)
        if not include_programmatic and (model.lower() in PROGRAMMATIC
                                         or "programmatic" in str(value).lower()):
            continue
        out.append((name, role, model))
    return out


def _parse_description(text: str, game: str, player_name: str, model_names: list[str]) -> tuple[str, str]:
    match = re.fullmatch(r"(.+?)\s*\((.+)\)", text)  # "Word Guesser (model)"
    if match:
        return match.group(1).strip(), match.group(2).strip()
    for separator in (", ", ": "):  # "WordDescriber, model" / "Answerer: model"
        if separator in text:
            role, model = text.split(separator, 1)
            return role.strip(), model.strip()
    role = LEGACY_ROLES.get((game, player_name), player_name)  # bare model name
    return role, text.strip() or _model_for(player_name, model_names)


def _models_from_folder(episode: _Episode) -> list[str]:
    """Model names from a 2.x model folder ``<m1>-t0.0--<m2>-t0.0``."""
    try:
        folder = episode.folder.parents[2].name
    except IndexError:
        return []
    return [re.sub(r"-t\d+(\.\d+)?$", "", part) for part in folder.split("--")]


def _model_for(player_name: str, model_names: list[str]) -> str:
    index = int(player_name.split()[-1]) - 1 if player_name.split()[-1].isdigit() else 0
    return model_names[min(index, len(model_names) - 1)] if model_names else ""


def _game_experiment_id(episode: _Episode) -> tuple[str, str, int]:
    meta = episode.interactions.get("meta")
    folder = episode.folder
    if isinstance(meta, dict) and meta.get("game_name"):  # 3.x
        return meta["game_name"], str(meta.get("experiment_name") or folder.parent.name), \
            int(meta.get("game_id", _folder_number(folder)))
    if len(folder.parts) < 3:
        raise _Skip("cannot tell game and experiment from the folder")
    game = folder.parent.parent.name
    experiment = re.sub(r"^\d+_", "", folder.parent.name)
    game_id = (episode.instance or {}).get("game_id", _folder_number(folder))
    return game, experiment, int(game_id)


def _folder_number(folder: Path) -> int:
    match = re.search(r"(\d+)", folder.name)
    if match is None:
        raise _Skip("cannot tell the game_id (no instance.json, no number in the folder name)")
    return int(match.group(1))


# ----------------------------------------------------------------------------- records

def player_messages(interactions: dict, player_name: str) -> list[dict]:
    """The player's conversation rebuilt from the events."""
    messages: list[dict] = []
    for turn in interactions["turns"]:
        for event in turn:
            action = event.get("action") or {}
            kind, content = action.get("type"), action.get("content")
            if not isinstance(content, str) or action.get("label") == "pseudo":
                continue  # a pseudo turn: the game master's words, not the model's
            if event.get("to") == player_name and event.get("from") == "GM" and kind == "send message":
                role = "user"
            elif event.get("from") == player_name and event.get("to") == "GM" and kind == "get message":
                role = "assistant"
            else:
                continue
            if messages and messages[-1]["role"] == role:
                messages[-1] = {"role": role, "content": f"{messages[-1]['content']}\n\n{content}"}
            else:
                messages.append({"role": role, "content": content})
    while messages and messages[-1]["role"] != "assistant":
        messages.pop()
    return messages


def episode_records(folder: Path, include_programmatic: bool = False, side_calls: bool = False) -> list[dict]:
    """The records of one episode folder (raises _Skip when it cannot be converted);
    programmatic players' only with ``include_programmatic``; side calls with ``side_calls``."""
    episode = _load(folder)
    game, experiment, game_id = _game_experiment_id(episode)
    scores = episode.scores.get("episode scores") if isinstance(episode.scores, dict) else None
    outcome = outcome_of(scores if isinstance(scores, dict) else None, episode.interactions)
    players = {name: (role, model) for name, role, model in _players(episode, game, include_programmatic)}
    calls = (_optional_json(folder / "episode.json") or {}).get("side_calls") or [] if side_calls else []
    conversations = [(name, None, player_messages(episode.interactions, name)) for name in players]
    conversations += [(c["player_name"], i, [{"role": m["role"], "content": m["content"]} for m in c["messages"]
                                             if m["role"] != "system"]
                       + [{"role": "assistant", "content": c["response"]}])
                      for i, c in enumerate(calls) if c.get("player_name") in players]
    records = []
    for name, side_call, messages in conversations:
        if messages:
            meta = {"game": game, "experiment": experiment, "game_id": game_id, "player_name": name,
                    "game_role": players[name][0], "model": players[name][1], "outcome": outcome}
            records.append({"messages": messages,
                            "meta": meta if side_call is None else {**meta, "side_call": side_call}})
    return records


def _why_no_record(folder: Path, side_calls: bool = False) -> str:
    episode = _load(folder)
    game = _game_experiment_id(episode)[0]
    if not _players(episode, game, include_programmatic=True):
        return "name no players"
    players = {name for name, _, _ in _players(episode, game)}
    if not players:
        return "had only programmatic players (see --include-programmatic)"
    # a player may answer only when its master calls its model inside a step (probes): no
    # turns; 2.x games logged them as events of their own, clemcore in the request logs
    said, read = "had players who answered only in side calls", lambda name: _optional_json(folder / name) or {}
    kinds = sorted({str(e.get("action", {}).get("type")) for turn in episode.interactions["turns"] for e in turn
                    if e.get("from") in players and e.get("to") == "GM"})
    logs = [f for f in (f"{'_'.join(n.lower().split())}.requests.json" for n in sorted(players))
            if isinstance(read(f), dict) and read(f).get("calls")]
    if not side_calls and isinstance(read("episode.json"), dict) and read("episode.json").get("side_calls"):
        return f"{said} (episode.json), not converted here"
    if kinds or logs:
        return f"{said} ({', '.join(map(repr, kinds))} events, no turn)" if kinds else \
            f"{said} (model calls inside the game's steps, in {', '.join(logs)}; interactions.json logs no turn of theirs)"
    return "ended before any player's reply"


def conversational_records(results_dir: str | Path, keep: DatasetFilter = DatasetFilter(), *,
                           include_programmatic: bool = False,
                           side_calls: bool = False) -> tuple[list[dict], ConversionReport]:
    """All records under ``results_dir`` that ``keep`` accepts, and a report.
    Programmatic players get records only with ``include_programmatic`` (SFT
    demonstrations); by default they are skipped, as the field's datasets do.

    A filter value that matches nothing in the data (e.g. a misspelt game) is a
    DatasetError naming the values that exist.
    """
    root = Path(results_dir)
    if not root.exists():
        raise DatasetError(f"results folder '{results_dir}' does not exist")
    if not root.is_dir():
        raise DatasetError(f"'{results_dir}' is not a folder")
    records, skipped, no_record, num_episodes = [], [], [], 0
    for folder in episode_folders(root):
        try:
            found = episode_records(folder, include_programmatic, side_calls)
            if not found:
                no_record.append((str(folder), _why_no_record(folder, side_calls)))
        except _Skip as e:
            skipped.append((str(folder), str(e)))
            continue
        num_episodes += 1
        records.extend(found)
    _check_filter_values(keep, records)
    kept = [r for r in records if keep.keeps(r["meta"])]
    return kept, ConversionReport(num_episodes, len(kept), tuple(skipped), len(records) - len(kept),
                                  tuple(no_record))


def _check_filter_values(keep: DatasetFilter, records: list[dict]) -> None:
    for option, wanted, key in (("game", keep.games, "game"), ("role", keep.roles, "game_role"),
                                ("model", keep.models, "model")):
        available = sorted({r["meta"][key] for r in records})
        for value in wanted:
            found = {role_key(a) for a in available} if key == "game_role" else set(available)
            if (role_key(value) if key == "game_role" else value) not in found:
                close = difflib.get_close_matches(value, available, n=3, cutoff=0.5)
                hint = f" Did you mean: {', '.join(close)}?" if close else ""
                shown = ", ".join(available[:12]) + (" ..." if len(available) > 12 else "")
                raise DatasetError(f"unknown {option} '{value}': not in the results.{hint} "
                                   f"Found: {shown or 'nothing'}")


# ----------------------------------------------------------------------------- files

def read_dataset_file(path: str | Path) -> list[dict]:
    """Records from a ``.jsonl`` file (one per line) or a ``.json`` list."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"dataset file '{path}' does not exist")
    records = read_json_rows(path, DatasetError, "records ({messages, meta})")
    for index, record in enumerate(records):
        if not isinstance(record, dict) or not isinstance(record.get("messages"), list):
            raise DatasetError(f"{path}: record {index} has no 'messages' list")
    return records


def read_results(folder: str | Path) -> list[dict]:
    """Records of every episode under a results/records folder (any depth), programmatic
    players included: they are the demonstrators. A thin wrapper of
    :func:`conversational_records` (malformed or partial episode folders are skipped) that
    names the ``--records`` folder in errors."""
    if not Path(folder).is_dir():
        raise DatasetError(f"records folder '{folder}' does not exist")
    records, _ = conversational_records(folder, include_programmatic=True)
    return records


def build_dataset(results_dir: str | Path, out: str | Path, keep: DatasetFilter = DatasetFilter(), *,
                  include_programmatic: bool = False, side_calls: bool = True) -> ConversionReport:
    """Convert ``results_dir`` into ``out`` (JSON lines), side calls included unless
    ``side_calls=False``; returns the report."""
    records, report = conversational_records(results_dir, keep, include_programmatic=include_programmatic,
                                             side_calls=side_calls)
    write_jsonl(records, out)
    return report
