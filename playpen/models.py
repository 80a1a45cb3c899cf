"""Loading a model by name — the learner, a teacher or partner, an evaluated model, a judge.

Every command and trainer loads models through :func:`load_model_by_name`: the name is
resolved in the registries (close matches on a typo), a remote backend's ``key.json``
fields are checked before anything loads, the embedded default model is prepared on
first use, and an adapter gets a model name of its own so that its results never mix
with the base model's. The embedded default model itself is :mod:`playpen.default_model`
(re-exported here).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from playpen.default_model import (DEFAULT_MODEL, MARKER_FILE, MODELS_DIR_ENV, check_model_dir,
                                   default_model_dir, default_model_registry_entry, ensure_local_model,
                                   models_dir, prepare_default_model)
from playpen.errors import AdapterError, PlaypenError

__all__ = ["load_model_by_name", "check_model_name", "check_adapter", "adapter_tag", "ROLES",
           # the embedded default model (playpen.default_model)
           "DEFAULT_MODEL", "MARKER_FILE", "MODELS_DIR_ENV", "check_model_dir", "default_model_dir",
           "default_model_registry_entry", "ensure_local_model", "models_dir", "prepare_default_model"]

ROLES = ("learner", "teacher", "partner", "model", "judge")


def check_adapter(adapter: str | Path, base_model: Optional[str] = None) -> Path:
    """The resolved folder of a PEFT adapter; AdapterError when it is not one, or when
    `base_model` (a hub id or folder) is given and the adapter names another base model in
    its adapter_config.json (``base_model_name_or_path``)."""
    path = Path(adapter)
    if not path.is_dir():
        raise AdapterError(f"adapter '{adapter}' is not a folder (expected a PEFT adapter folder "
                           f"with adapter_config.json, e.g. models/sft+lora/<model>/checkpoint-N)")
    config_file = path / "adapter_config.json"
    if not config_file.exists():
        raise AdapterError(f"adapter '{adapter}' has no adapter_config.json: not a PEFT adapter "
                           f"(a full checkpoint is a model folder: register it as huggingface_id)")
    if base_model:
        import json
        try:
            trained_on = json.loads(config_file.read_text(encoding="utf-8")).get("base_model_name_or_path")
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError) as e:
            raise AdapterError(f"adapter '{adapter}': unreadable adapter_config.json ({e})") from e
        if trained_on and not same_model(str(trained_on), str(base_model)):
            raise AdapterError(f"adapter '{adapter}' was trained on base model '{trained_on}', not on "
                               f"'{base_model}': an adapter only fits the model it was trained on")
    return path.resolve()


def same_model(a: str, b: str) -> bool:
    """Two model references (hub ids or folders) name the same model: equal, the same
    folder, or the same last name (a moved folder; a hub id and its local copy)."""
    if a == b:
        return True
    path_a, path_b = Path(a), Path(b)
    if path_a.exists() and path_b.exists() and path_a.resolve() == path_b.resolve():
        return True
    return path_a.name.lower() == path_b.name.lower()


def adapter_tag(adapter: str | Path, model_name: str) -> str:
    """A readable, folder-safe tag for an adapter path, e.g.
    ``models/sft+lora/smol-135m/checkpoint-8`` → ``sft+lora-checkpoint-8``."""
    path = Path(adapter).resolve()
    parts = list(path.parts)
    if "models" in parts:
        parts = parts[len(parts) - parts[::-1].index("models"):]
    else:
        parts = parts[-2:]
    parts = [p for p in parts if p != model_name] or [path.name]
    return re.sub(r"[^A-Za-z0-9+._-]", "_", "-".join(parts))


def check_model_name(name: str, role: str = "model"):
    """Resolve `name` and check what it needs (credentials; a learner must be a local HF
    model) without loading anything; returns the registry entry."""
    from playpen import registry
    entry = registry.resolve_model(name)
    if role == "learner" and entry.backend != "huggingface_local":
        raise PlaypenError(f"the learner must be a huggingface_local model; '{name}' uses "
                           f"backend '{entry.backend}'")
    registry.check_key_for(entry)
    return entry


def load_model_by_name(name: str, *, gen_args: Optional[dict] = None, role: str = "model",
                       adapter: str | Path | None = None, run_name: Optional[str] = None):
    """Load a registered model as a clemcore ``Model``.

    Args:
        name: a model registry name (``programmatic``/``mock``/``human`` need no entry).
        gen_args: ``temperature`` and ``max_tokens`` (default greedy, 300 tokens).
        role: ``learner`` (must be ``huggingface_local``), ``teacher``, ``partner``,
            ``model`` or ``judge``; only named in errors.
        adapter: a PEFT adapter folder loaded on top (``huggingface_local`` only); the
            model is then named ``<name>+<adapter tag>`` unless ``run_name`` is given.
        run_name: the model name written to records (default: `name`).
    """
    from playpen.clem import clemcore, load_model
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    entry = check_model_name(name, role)
    spec = dict(entry.spec)
    if adapter is not None:
        if entry.backend != "huggingface_local":
            raise AdapterError(f"an adapter needs a huggingface_local model; '{name}' uses "
                               f"backend '{entry.backend}'")
        adapter_path = check_adapter(adapter, base_model=spec.get("huggingface_id"))
        spec["model_config"] = dict(spec.get("model_config") or {}, peft_model=str(adapter_path))
        spec["model_name"] = run_name or f"{name}+{adapter_tag(adapter_path, name)}"
    elif run_name:
        spec["model_name"] = run_name
    ensure_local_model(entry)
    model_spec = clemcore().backends.ModelSpec.from_dict(spec)
    return load_model(model_spec, dict(gen_args or dict(temperature=0.0, max_tokens=300)))
