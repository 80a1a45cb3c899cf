"""Model and game registries: JSON data, validated on load, with errors that name the
file, the line and the valid choices.

Lookup order for models: ``./model_registry.json`` (the workspace), then playpen's
built-in entries (the embedded default model), then clemcore's packaged registry; the
first entry with a given name wins. Games: ``./game_registry.json`` entries, playpen's
packaged games, then clemcore's scan of the working directory; a plain name picks the
first copy, ``source:game`` or a folder path any copy (:func:`resolve_game`).

Longer than 400 lines because every registry entry kind and field type is validated here,
next to the lookup that reads it.
"""
from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from playpen.clem import clemgame
from playpen.default_model import default_model_registry_entry
from playpen.errors import RegistryError, UnknownGameError, UnknownModelError
from playpen.games import GAMES_DIR

MODEL_REGISTRY_FILE = "model_registry.json"
GAME_REGISTRY_FILE = "game_registry.json"
KEY_FILE = "key.json"
PROGRAMMATIC_MODELS = ("programmatic", "mock")
HUMAN_MODELS = ("human", "terminal")
LOCAL_BACKENDS = ("huggingface_local", "huggingface_multimodal", "llamacpp", "_player_programmed",
                  "_player_human")


def read_json(path: Path) -> Any:
    """Read a JSON file; malformed JSON becomes a RegistryError naming file and line."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise RegistryError(f"{path}: cannot read: {e.strerror}") from e
    except UnicodeDecodeError as e:
        raise RegistryError(f"{path}: not UTF-8 text (byte {e.start}): JSON files are UTF-8") from e
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise RegistryError(f"{path}:{e.lineno}:{e.colno}: malformed JSON: {e.msg}") from e


def close_matches(name: str, choices: list[str]) -> str:
    matches = difflib.get_close_matches(name, choices, n=3, cutoff=0.5)
    return f" Did you mean: {', '.join(matches)}?" if matches else ""


# --------------------------------------------------------------------------- models

@dataclass(frozen=True)
class ModelEntry:
    """One model registry entry and where it came from."""

    name: str
    backend: str
    spec: dict = field(hash=False, compare=False)
    source: str = ""

    @property
    def is_programmatic(self) -> bool:
        return self.name in PROGRAMMATIC_MODELS

    @property
    def is_human(self) -> bool:
        return self.name in HUMAN_MODELS

    @property
    def is_remote(self) -> bool:
        return self.backend not in LOCAL_BACKENDS


def _validate_model_entries(data: Any, source: str) -> list[ModelEntry]:
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise RegistryError(f"{source}: a model registry must be a JSON list of entries, "
                            f"got {type(data).__name__}")
    entries = []
    for index, item in enumerate(data):
        where = f"{source}: entry {index}"
        if not isinstance(item, dict):
            raise RegistryError(f"{where}: must be an object with 'model_name' and 'backend'")
        for key in ("model_name", "backend"):
            if not isinstance(item.get(key), str) or not item[key]:
                raise RegistryError(f"{where}: missing or empty '{key}'")
        where = f"{source}: model '{item['model_name']}'"
        config = item.get("model_config", {})
        typed = [("huggingface_id", item.get("huggingface_id", ""), str), ("model_id", item.get("model_id", ""), str),
                 ("model_config", config, dict),
                 ("model_config.peft_model", config.get("peft_model", "") if isinstance(config, dict) else "", str)]
        for key, value, kind in typed:
            if not isinstance(value, kind):
                raise RegistryError(f"{where}: '{key}' is {value!r}, expected {'a string' if kind is str else 'an object'}")
        if item["backend"] == "huggingface_local":
            if not item.get("huggingface_id"):
                raise RegistryError(f"{where}: huggingface_local needs 'huggingface_id' "
                                    f"(a hub id or a local folder)")
            config = item.get("model_config")
            if not isinstance(config, dict) or "premade_chat_template" not in config \
                    or "eos_to_cull" not in config:
                raise RegistryError(f"{where}: huggingface_local needs 'model_config' with "
                                    f"'premade_chat_template' and 'eos_to_cull'")
        entries.append(ModelEntry(item["model_name"], item["backend"], dict(item), source))
    return entries


def builtin_model_entries() -> list[ModelEntry]:
    """playpen's own entries (the embedded default model), valid without a workspace file."""
    return _validate_model_entries([default_model_registry_entry()], "playpen (built-in)")


def clemcore_model_entries() -> list[ModelEntry]:
    # read the file without importing clemcore: its import writes ./clembench.log (playpen.clem)
    import importlib.util
    spec = importlib.util.find_spec("clemcore")
    path = Path(list(spec.submodule_search_locations)[0]) / "backends" / MODEL_REGISTRY_FILE
    return _validate_model_entries(json.loads(path.read_text(encoding="utf-8")), "clemcore (packaged)")


def model_entries(cwd: Path | None = None) -> list[ModelEntry]:
    """All model entries in lookup order (workspace first)."""
    cwd = Path(cwd or Path.cwd())
    entries: list[ModelEntry] = []
    workspace_file = cwd / MODEL_REGISTRY_FILE
    if workspace_file.exists():
        entries += _validate_model_entries(read_json(workspace_file), str(workspace_file))
    entries += builtin_model_entries()
    entries += clemcore_model_entries()
    return entries


def resolve_model(name: str, cwd: Path | None = None) -> ModelEntry:
    """Find the first entry named `name`; `programmatic`/`mock`/`human` need no entry."""
    if name in PROGRAMMATIC_MODELS:
        return ModelEntry(name, "_player_programmed", {"model_name": name, "backend": "_player_programmed"})
    if name in HUMAN_MODELS:
        return ModelEntry(name, "_player_human", {"model_name": name, "backend": "_player_human"})
    entries = model_entries(cwd)
    for entry in entries:
        if entry.name == name:
            return _absolutise(entry)
    names = sorted({e.name for e in entries} | set(PROGRAMMATIC_MODELS))
    raise UnknownModelError(f"unknown model '{name}'.{close_matches(name, names)} "
                            f"See `playpen list models`.")


def _absolutise(entry: ModelEntry) -> ModelEntry:
    """Local paths in a workspace registry are relative to that file, not to the cwd."""
    spec = dict(entry.spec)
    base = Path(entry.source).parent if entry.source.endswith(".json") else Path.cwd()
    model_id = spec.get("huggingface_id")
    if isinstance(model_id, str) and (model_id.startswith(".") or model_id.startswith("models/")):
        spec["huggingface_id"] = str((base / model_id).resolve())
    config = dict(spec.get("model_config") or {})
    adapter = config.get("peft_model")
    if isinstance(adapter, str) and not os.path.isabs(adapter) and (base / adapter).exists():
        config["peft_model"] = str((base / adapter).resolve())
        spec["model_config"] = config
    return ModelEntry(entry.name, entry.backend, spec, entry.source)


# --------------------------------------------------------------------------- games

@dataclass(frozen=True)
class GameEntry:
    """One copy of a game: its spec, where it was found and how to ask for this copy."""

    name: str
    path: Path
    spec: dict = field(hash=False, compare=False)
    source: str = ""
    qualifier: str = ""
    """The benchmark folder the copy was found in (``playpen`` for playpen's own games):
    ``<qualifier>:<name>`` asks for this copy."""
    shadowed: bool = False
    """An earlier copy of the same name wins by default (lookup order)."""

    @property
    def qualified_name(self) -> str:
        return f"{self.qualifier}:{self.name}"


def packaged_games_dir() -> Path:
    return GAMES_DIR


def _qualifier(folder: Path, default: str) -> str:
    packaged = packaged_games_dir().resolve()
    return "playpen" if packaged in (folder.resolve(), *folder.resolve().parents) else default


def _game_specs_in(directory: Path, source: str, max_depth: int = 3,
                   qualifier: str | None = None) -> list[GameEntry]:
    """Walk `directory` like clemcore does (clemgame.json folders, skipping in/, resources/...).
    Copies are qualified by `qualifier`, else by the folder holding the game folder."""
    found: list[GameEntry] = []
    skip = {"venv", ".venv", "__pycache__", "docs", "in", "resources", "utils", "evaluation", "files",
            "node_modules", "models", "results", "playpen-records"}

    def walk(path: Path, depth: int):
        if depth > max_depth or not path.is_dir():
            return
        spec_file = path / "clemgame.json"
        if spec_file.exists():
            data = read_json(spec_file)
            specs = data if isinstance(data, list) else [data]
            label = _qualifier(path, qualifier or path.resolve().parent.name)
            for spec in specs:
                if not isinstance(spec, dict) or not isinstance(spec.get("game_name"), str) or not spec["game_name"]:
                    raise RegistryError(f"{spec_file}: every spec needs a 'game_name' (a non-empty string)")
                found.append(GameEntry(spec["game_name"], path, dict(spec, game_path=str(path)), source, label))
            return
        try:
            children = sorted(path.iterdir())
        except PermissionError:
            return
        for child in children:
            if child.is_dir() and not child.name.startswith(".") and child.name not in skip:
                walk(child, depth + 1)

    walk(directory, 0)
    return found


def _completed_entry(item: dict, path: Path, where: str) -> dict:
    """A ``{"game_name", "game_path"}`` entry completed from the folder's clemgame.json spec of
    that name (the entry's fields win), as ``clem`` plays it: its cwd scan finds the folder."""
    data = read_json(path / "clemgame.json")
    specs = [s for s in (data if isinstance(data, list) else [data]) if isinstance(s, dict)]
    own = [s for s in specs if s.get("game_name") == item["game_name"]]
    if own or "players" in item:  # else: a complete entry of its own (old clembench registries)
        return {**(own[0] if own else {}), **item}
    names = [s.get("game_name") for s in specs]
    raise RegistryError(f"{where}: {path / 'clemgame.json'} has no game '{item['game_name']}' "
                        f"(it has: {', '.join(map(str, names)) or 'none'})")


def all_game_entries(cwd: Path | None = None, scan_cwd: bool = True) -> list[GameEntry]:
    """Every copy of every game in lookup order — ``game_registry.json`` entries in file order,
    playpen's packaged games, the cwd scan — each folder once; a later copy of a name is
    marked ``shadowed``."""
    cwd = Path(cwd or Path.cwd())
    entries: list[GameEntry] = []
    registry_file = cwd / GAME_REGISTRY_FILE
    if registry_file.exists():
        data = read_json(registry_file)
        if not isinstance(data, list):
            raise RegistryError(f"{registry_file}: must be a JSON list of game entries")
        for index, item in enumerate(data):
            if not isinstance(item, dict):
                raise RegistryError(f"{registry_file}: entry {index} must be an object")
            for key in ("benchmark_path", "game_path", "game_name"):
                if key in item and (not isinstance(item[key], str) or not item[key]):
                    raise RegistryError(f"{registry_file}: entry {index}: '{key}' is {item[key]!r}, expected a "
                                        f"{'name' if key == 'game_name' else 'folder'} (a non-empty string)")
            if "benchmark_path" in item:
                path = Path(item["benchmark_path"])
                path = path if path.is_absolute() else cwd / path
                if not path.is_dir():
                    raise RegistryError(f"{registry_file}: entry {index}: benchmark_path '{path}' "
                                        f"is not a directory")
                entries += _game_specs_in(path, str(registry_file), qualifier=path.resolve().name)
            elif "game_name" in item and "game_path" in item:
                path = Path(item["game_path"])
                path = path if path.is_absolute() else cwd / path
                if not (path / "clemgame.json").is_file():
                    raise RegistryError(f"{registry_file}: entry {index} ('{item['game_name']}'): game_path "
                                        f"'{path}' is {'not a game folder (no clemgame.json)' if path.is_dir() else 'no folder'}")
                spec = _completed_entry(item, path, f"{registry_file}: entry {index} ('{item['game_name']}')")
                entries.append(GameEntry(item["game_name"], path, dict(spec, game_path=str(path)),
                                         str(registry_file), _qualifier(path, path.resolve().parent.name)))
            else:
                raise RegistryError(f"{registry_file}: entry {index} needs 'benchmark_path' or "
                                    f"'game_name' and 'game_path'")
    entries += _game_specs_in(packaged_games_dir(), "playpen (packaged)", max_depth=2)
    if scan_cwd:
        entries += _game_specs_in(cwd, "working directory scan")
    out, copies, names = [], set(), set()
    for entry in entries:
        key = (entry.name, Path(entry.path).resolve())
        if key not in copies:  # the same folder found twice is one copy
            copies.add(key)
            out.append(replace(entry, shadowed=entry.name in names))
            names.add(entry.name)
    return out


def game_entries(cwd: Path | None = None, scan_cwd: bool = True) -> list[GameEntry]:
    """The games in lookup order, the first copy of each name (what a plain name picks)."""
    return [entry for entry in all_game_entries(cwd, scan_cwd) if not entry.shadowed]


def resolve_game(name: str, cwd: Path | None = None) -> GameEntry:
    """The copy of a game that `name` asks for: ``game`` (the first copy in lookup order),
    ``qualifier:game`` (the copy found in that benchmark folder, see ``playpen list games``),
    or a path to a game folder (with a ``/``; ``path:game`` for a folder with several specs)."""
    if "/" in name or os.sep in name:
        return _game_at(name, Path(cwd or Path.cwd()))
    entries = all_game_entries(cwd)
    qualifier, _, game = name.rpartition(":")
    for entry in entries:
        if entry.name == game and (entry.qualifier == qualifier if qualifier else not entry.shadowed):
            return entry
    copies = [e.qualified_name for e in entries if e.name == game]
    if copies:
        raise UnknownGameError(f"no copy of game '{game}' is qualified '{qualifier}': the copies are "
                               f"{', '.join(copies)}. See `playpen list games`.")
    raise UnknownGameError(f"unknown game '{name}'.{close_matches(game, sorted({e.name for e in entries}))} "
                           f"See `playpen list games`.")


def _game_at(text: str, cwd: Path) -> GameEntry:
    folder, _, game = text.rpartition(":") if ":" in text.rsplit("/", 1)[-1] else (text, "", "")
    path = Path(folder).expanduser()
    path = path if path.is_absolute() else cwd / path
    if not (path / "clemgame.json").is_file():
        raise UnknownGameError(f"'{text}': {path} is not a game folder (no clemgame.json)")
    found = _game_specs_in(path, f"path {folder}", max_depth=0)
    chosen = [e for e in found if e.name == game] if game else found
    if len(chosen) != 1:
        names = ", ".join(e.name for e in found)
        raise UnknownGameError(f"'{text}': {path} holds the games {names}: "
                               f"{'pick one with' if not game else 'use one of'} {folder}:<game>")
    return chosen[0]


# --------------------------------------------------------------------------- game specs and instance sets

HELD_OUT_INSTANCES = "instances"
"""The instances file a game evaluates on unless its spec names its own (``clemgame.json``
``"instances"``): ``in/instances.json``, ``clem run``'s default."""
TRAIN_INSTANCES = "instances_train"
"""The training split: ``in/instances_train.json``, or ``in/<own>_train.json`` for a spec that
names its own instances file ``<own>`` (several specs sharing one folder); never evaluated on."""


def instance_sets(game_path: str | Path) -> list[str]:
    """The instance files of a game folder (stems of ``in/*.json``)."""
    return sorted(p.stem for p in (Path(game_path) / "in").glob("*.json"))


def own_instances(spec: dict) -> str:
    """The instances file stem a game spec plays by default (its ``"instances"`` or ``instances``)."""
    return spec.get("instances") or HELD_OUT_INSTANCES


def instances_stem(spec: dict, instances: str | None) -> str:
    """The instances file stem that `instances` means for this spec: None = its own file;
    :data:`TRAIN_INSTANCES` = its training split; anything else as given."""
    if not instances:
        return own_instances(spec)
    if instances == TRAIN_INSTANCES and own_instances(spec) != HELD_OUT_INSTANCES:
        return f"{own_instances(spec)}_train"
    return instances


def game_spec(name: str, instances: str | None = None, cwd: Path | None = None):
    """The clemcore ``GameSpec`` of a game name, with its instances file (a stem in the game's
    ``in/`` folder, see :func:`instances_stem`) checked and set in ``spec.instances``."""
    entry = resolve_game(name, cwd)
    players = entry.spec.get("players")
    if type(players) is not int or players < 1:
        raise RegistryError(f"game '{entry.name}' ({Path(entry.path) / 'clemgame.json'}): 'players' is {players!r}, "
                            f"expected an integer >= 1")
    spec = clemgame().GameSpec.from_dict(dict(entry.spec))
    stem = instances_stem(entry.spec, instances)
    if not (Path(entry.path) / "in" / f"{stem}.json").exists():
        found = ", ".join(instance_sets(entry.path)) or "none"
        what = ": the training split, see docs/own-games.md (or --train-instances)" * (instances == TRAIN_INSTANCES)
        raise UnknownGameError(f"game '{entry.name}' has no in/{stem}.json (instance files: {found}){what}")
    spec.instances = stem
    return spec


def game_specs(names: list[str] | None, instances: str | None = None) -> list:
    """:func:`game_spec` for each name; no names: every game of ``game_registry.json`` and
    playpen's packaged games (not the working-directory scan). ``instances`` given: every
    game must have that file, else one error names all that lack it."""
    names = names or [entry.name for entry in game_entries(scan_cwd=False)]
    specs, missing = [], []
    for name in names:
        try:
            specs.append(game_spec(name, instances))
        except UnknownGameError:
            if not instances:
                raise
            resolve_game(name)  # an unknown name is its own error
            missing.append(name)
    if missing and len(names) == 1:
        return [game_spec(names[0], instances)]  # raises, naming the files the game has
    if missing:
        raise UnknownGameError(f"instances '{instances}': {', '.join(missing)} "
                               f"{'has' if len(missing) == 1 else 'have'} no such file in in/; "
                               f"without -i each game plays its own instances file")
    twins = [n for n, s in zip(names, specs) if [t.game_name for t in specs].count(s.game_name) > 1]
    if twins:  # their records would share one folder
        raise UnknownGameError(f"{', '.join(twins)} are copies of one game name: play them in separate calls")
    return specs


def clem_game_registry(cwd: Path | None = None):
    """A clemcore ``GameRegistry`` with playpen's view of the games (first of a name wins)."""
    return clemgame().GameRegistry([clemgame().GameSpec.from_dict(dict(e.spec)) for e in game_entries(cwd)])
