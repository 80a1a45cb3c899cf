"""`playpen setup`: everything a fresh workspace needs, idempotently."""
from __future__ import annotations

import shutil
from pathlib import Path

import click

from playpen.default_model import check_model_dir, prepare_default_model


@click.command("setup")
@click.option("--force", is_flag=True, help="Rebuild the default model even if it looks complete.")
@click.option("--verify/--no-verify", default=True, help="Hash-check the prepared model files.")
def setup_command(force, verify):
    """Prepare the workspace: the embedded default model and registry files."""
    for line in setup(force=force, verify=verify):
        click.echo(line)


def setup(force: bool = False, verify: bool = True, cwd: Path | None = None):
    cwd = Path(cwd or Path.cwd())
    template = cwd / "game_registry.json.template"
    target = cwd / "game_registry.json"
    if template.exists() and not target.exists():
        shutil.copyfile(template, target)
        yield f"wrote {target} from {template.name}"
    elif target.exists():
        yield f"kept existing {target}"
    folder = prepare_default_model(force=force, deep_check=verify)
    problem = check_model_dir(folder, deep=verify)
    if problem is not None:
        from playpen.errors import ModelPreparationError
        raise ModelPreparationError(f"{folder} is {problem} after preparation")
    yield f"default model smol-135m ready: {folder}"
