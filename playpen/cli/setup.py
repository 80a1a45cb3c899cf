"""`playpen setup`: make any folder a workspace, idempotently.

The converted default model lives once per user (``~/.cache/playpen/models``, or
``$PLAYPEN_MODELS_DIR``; :mod:`playpen.default_model`), shared by every workspace. What a
folder gets is two small registry files for clemcore's own `clem` CLI, which knows
neither playpen's games nor its model: ``game_registry.json`` pointing at playpen's
packaged games and ``model_registry.json`` naming the cached model. Existing files are
the user's and are kept.
"""
from __future__ import annotations

from pathlib import Path

import click

from playpen.default_model import (DEFAULT_MODEL, check_model_dir, default_model_dir, default_model_registry_entry,
                                   managed_folder, prepare_default_model)
from playpen.errors import ModelPreparationError
from playpen.files import write_json
from playpen.registry import (GAME_REGISTRY_FILE, MODEL_REGISTRY_FILE, all_game_entries, model_entries,
                              packaged_games_dir, resolve_model)


@click.command("setup")
@click.option("--force", is_flag=True, help="Rebuild the default model even if it looks complete.")
@click.option("--verify/--no-verify", default=True, help="Hash-check the prepared model files.")
def setup_command(force, verify):
    """Make this folder a workspace: the default model (in the per-user cache) and the
    registry files that let `clem run -g GAME -m smol-135m` find playpen's games and model."""
    for line in setup(force=force, verify=verify):
        click.echo(line)


def setup(force: bool = False, verify: bool = True, cwd: Path | None = None):
    """Yield one line per thing done or kept."""
    cwd = Path(cwd or Path.cwd())
    games = cwd / GAME_REGISTRY_FILE
    if games.exists():
        packaged = {e.name for e in all_game_entries(cwd, scan_cwd=False) if e.source == str(games)
                    and e.qualifier == "playpen"}
        note = "" if packaged else "; it does not name playpen's games (`clem` will not find them: add " \
                                   f'{{"benchmark_path": "{packaged_games_dir()}"}})'
        yield f"kept existing {games}{note}"
    else:
        write_json(games, [{"benchmark_path": str(packaged_games_dir())}])
        yield f"wrote {games}: playpen's games for `clem run -g GAME`"

    # the smol-135m this workspace uses: the cache's, or a managed folder its registry names
    folder = managed_folder(resolve_model(DEFAULT_MODEL, cwd)) or default_model_dir()
    folder = prepare_default_model(folder, force=force, deep_check=verify)
    problem = check_model_dir(folder, deep=verify)
    if problem is not None:
        raise ModelPreparationError(f"{folder} is {problem} after preparation")
    yield f"default model {DEFAULT_MODEL} ready: {folder}"

    models = cwd / MODEL_REGISTRY_FILE
    if not models.exists():
        write_json(models, [default_model_registry_entry()])
        yield f"wrote {models}: {DEFAULT_MODEL} for `clem run -m {DEFAULT_MODEL}`"
    elif not any(e.name == DEFAULT_MODEL and e.source == str(models) for e in model_entries(cwd)):
        yield (f"kept existing {models}; it has no {DEFAULT_MODEL} entry (playpen knows the model; "
               f"`clem run -m {DEFAULT_MODEL}` needs one)")
    else:
        yield f"kept existing {models}"
