"""`playpen register`: a trained adapter becomes a model by name.

A LoRA run leaves an adapter folder (``models/<method>/<learner>/checkpoint-N``) that only
``--adapter PATH`` can play. Registered, it is a model like any other: an entry of the
workspace's ``model_registry.json`` that copies the learner's entry under a new name and
adds the adapter as ``model_config.peft_model`` — the key clemcore's ``huggingface_local``
backend loads the adapter from — so that ``playpen eval -m NAME``, ``clem run -m NAME``, a
tournament or a trainer's partner all play it.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import click

from playpen.default_model import managed_folder
from playpen.errors import PlaypenError, RegistryError
from playpen.files import write_json
from playpen.models import check_adapter, check_model_name
from playpen.registry import MODEL_REGISTRY_FILE, PROGRAMMATIC_MODELS, model_entries, read_json

RUN_SUMMARY = "playpen-run.json"


@click.command("register")
@click.argument("name")
@click.argument("trained", type=click.Path())
@click.option("-l", "--learner", default=None,
              help="The model the adapter was trained on [default: the learner its run's playpen-run.json names].")
@click.option("--overwrite", is_flag=True, help="Replace an entry NAME of this workspace's model_registry.json.")
def register_command(name, trained, learner, overwrite):
    """Register TRAINED — an adapter folder (checkpoint-N) or a run folder (its last
    checkpoint) — as model NAME in ./model_registry.json: its learner's entry with the
    adapter on top, for `playpen eval -m NAME` and `clem run -m NAME`."""
    entry = register(name, Path(trained), learner=learner, overwrite=overwrite)
    click.echo(f"registered {name}: {entry['model_config']['peft_model']} on "
               f"{entry['huggingface_id']} in {Path.cwd() / MODEL_REGISTRY_FILE}")


def register(name: str, trained: Path, *, learner: Optional[str] = None, overwrite: bool = False,
             cwd: Optional[Path] = None) -> dict:
    """Write the entry (see the module doc) and return it; a PlaypenError, nothing written,
    when NAME is taken, TRAINED is no adapter, or the learner is unknown or another model."""
    cwd = Path(cwd or Path.cwd())
    if not name.strip() or name != name.strip() or name in PROGRAMMATIC_MODELS:
        raise PlaypenError(f"'{name}' is not a model name to register (no spaces around it, not "
                           f"{' or '.join(PROGRAMMATIC_MODELS)})")
    if not trained.is_dir():
        check_adapter(trained)  # one line: not a folder
    adapter, run_learner = _adapter_of(trained)
    learner = learner or run_learner
    if not learner:
        raise PlaypenError(f"{trained}: no {RUN_SUMMARY} names the learner: pass -l/--learner MODEL")
    base = check_model_name(learner, "learner")
    check_adapter(adapter, base_model=base.spec.get("huggingface_id"))
    registry_file = cwd / MODEL_REGISTRY_FILE
    entries = read_json(registry_file) if registry_file.exists() else []
    if not isinstance(entries, list):
        raise RegistryError(f"{registry_file}: expected a list of model entries")
    mine = [i for i, e in enumerate(entries) if isinstance(e, dict) and e.get("model_name") == name]
    if mine and not overwrite:
        raise PlaypenError(f"model '{name}' is already in {registry_file}: pass --overwrite to replace it")
    if not mine and any(e.name == name for e in model_entries(cwd)):
        raise PlaypenError(f"model '{name}' is already registered (`playpen list models`): choose another name")
    spec = {key: value for key, value in base.spec.items() if key != "lookup_source"}
    folder = managed_folder(base)  # the embedded model: its prepared folder, which clem can load
    if folder is not None:
        spec["huggingface_id"] = str(folder.resolve())
    entry = {**spec, "model_name": name,
             "model_config": {**(spec.get("model_config") or {}), "peft_model": str(adapter.resolve())}}
    entries = [entry if i in mine else e for i, e in enumerate(entries)] if mine else [*entries, entry]
    write_json(registry_file, entries, indent=2)
    return entry


def _adapter_of(trained: Path) -> tuple[Path, Optional[str]]:
    """(the adapter folder, the learner its run names or None) of an adapter or run folder."""
    summary = next((folder / RUN_SUMMARY for folder in (trained, trained.parent) if (folder / RUN_SUMMARY).is_file()),
                   None)
    run = {}
    if summary is not None:
        try:
            run = json.loads(summary.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise PlaypenError(f"{summary}: unreadable ({e})") from e
    if (trained / "adapter_config.json").exists() or summary is None or summary.parent != trained:
        return trained, run.get("learner")
    checkpoint = run.get("checkpoint")
    if not checkpoint or checkpoint == "None":
        raise PlaypenError(f"{summary} names no checkpoint: the run saved none")
    return Path(checkpoint), run.get("learner")
