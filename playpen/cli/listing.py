"""`playpen list games|models|backends`."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import click

from playpen import registry
from playpen.errors import PlaypenError


@click.command("list")
@click.argument("what", type=click.Choice(["games", "models", "backends"]))
@click.option("-v", "--verbose", is_flag=True, help="Show the whole entries.")
@click.option("-s", "--selector", default="all",
              help="Filter: a name, or JSON like \"{'benchmark':['2.0']}\" (games only).")
def list_command(what, verbose, selector):
    """List the games, models or backends playpen can use from this directory."""
    for line in lines(what, verbose=verbose, selector=selector):
        click.echo(line)


def lines(what: str, verbose: bool = False, selector: str = "all") -> list[str]:
    if what == "games":
        return game_lines(verbose, selector)
    if what == "models":
        return model_lines(verbose)
    return backend_lines(verbose)


def _parse_selector(selector: str):
    if selector == "all":
        return None
    text = selector.strip()
    if text.startswith("{"):
        try:
            value = json.loads(text.replace("'", '"'))
        except json.JSONDecodeError as e:
            raise PlaypenError(f"--selector: malformed JSON '{selector}': {e.msg}") from e
        if not isinstance(value, dict):
            raise PlaypenError(f"--selector must be a game name or a JSON object, got '{selector}'")
        return value
    return {"game_name": text}


def _matches(spec: dict, selector: dict) -> bool:
    for key, wanted in selector.items():
        have = spec.get(key)
        if isinstance(wanted, list):
            if not isinstance(have, list) or not any(w in have for w in wanted):
                return False
        elif isinstance(have, list):
            if wanted not in have:
                return False
        elif have != wanted:
            return False
    return True


def game_lines(verbose: bool, selector: str) -> list[str]:
    """Every copy of every game, in lookup order; a later copy of a name is marked shadowed
    (a plain name picks the first; ``SOURCE:GAME`` or a path picks any copy)."""
    entries = registry.all_game_entries()
    chosen = _parse_selector(selector)
    if chosen is not None:
        entries = [e for e in entries if _matches(e.spec, chosen)]
        if not entries and "game_name" in chosen:
            registry.resolve_game(chosen["game_name"])  # raises with close matches
    names = {e.name for e in entries}
    header = f"Games ({len(names)}"
    num_shadowed = sum(e.shadowed for e in entries)
    if num_shadowed:
        header += f"; {num_shadowed} shadowed cop{'y' if num_shadowed == 1 else 'ies'}: pick one with SOURCE:GAME"
    out = [header + "):"]
    winner = {}
    # columns as wide as their longest entry (clembench names reach 30 characters)
    name_width = max([22] + [len(e.name) for e in entries])
    source_width = max([30] + [len(e.qualified_name) for e in entries])
    players_width = max([2] + [len(f"{e.spec.get('players', '?')}p") for e in entries])
    for entry in entries:
        winner.setdefault(entry.name, entry)
        spec = entry.spec
        players = spec.get("players", "?")
        desc = spec.get("description", "")
        mark = f"  (shadowed by {winner[entry.name].qualified_name})" if entry.shadowed else ""
        out.append(f"  {entry.name:<{name_width}} {f'{players}p':<{players_width}}  "
                   f"{entry.qualified_name:<{source_width}} {desc}{mark}")
        if verbose:
            out.append(f"      path: {entry.path}  (from {entry.source})")
            out.append("      " + json.dumps({k: v for k, v in spec.items() if k != "game_path"},
                                             ensure_ascii=False))
    return out


def model_lines(verbose: bool) -> list[str]:
    entries = registry.model_entries()
    seen = set()
    out = ["Models (first entry of a name wins; workspace model_registry.json comes first):"]
    for entry in entries:
        shadowed = entry.name in seen
        seen.add(entry.name)
        mark = " (shadowed)" if shadowed else ""
        out.append(f"  {entry.name:<34} {entry.backend:<20} {entry.source}{mark}")
        if verbose:
            out.append("      " + json.dumps(entry.spec, ensure_ascii=False))
    out.append(f"  {'programmatic, mock':<34} {'_player_programmed':<20} built into clemcore")
    out.append(f"  {'human, terminal':<34} {'_player_human':<20} built into clemcore")
    return out


def backend_lines(verbose: bool) -> list[str]:
    spec = importlib.util.find_spec("clemcore")
    packaged = Path(list(spec.submodule_search_locations)[0]) / "backends"
    rows = [(p, "packaged") for p in sorted(packaged.glob("*_api.py"))]
    rows += [(p, "working directory") for p in sorted(Path.cwd().glob("*_api.py"))]
    out = ["Backends (name = file name without _api.py):"]
    for path, where in rows:
        name = path.name[: -len("_api.py")]
        out.append(f"  {name:<24} {where}" + (f"  {path}" if verbose else ""))
    return out
