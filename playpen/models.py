"""Loading a model by name — the learner, a teacher or partner, an evaluated model, a judge.

Every command and trainer loads models through :func:`load_model_by_name`: the name is
resolved in the registries (close matches on a typo), a remote backend's ``key.json``
fields are checked before anything loads, the embedded default model is prepared on
first use, and an adapter gets a model name of its own so that its results never mix
with the base model's. The embedded default model itself is :mod:`playpen.default_model`
(re-exported here).
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Optional

from playpen import registry
from playpen.clem import clemcore, load_model
from playpen.default_model import (DEFAULT_MODEL, MARKER_FILE, MODELS_DIR_ENV, check_model_dir, default_model_dir,
                                   default_model_registry_entry, ensure_local_model, managed_folder, models_dir,
                                   prepare_default_model)
from playpen.distributed import device_map
from playpen.errors import AdapterError, MissingKeyError, PlaypenError, RegistryError
from playpen.registry import KEY_FILE, close_matches, read_json

__all__ = ["load_model_by_name", "check_model_name", "check_adapter", "load_init_adapter", "check_key_for", "check_backend_for",
           "backend_names", "adapter_tag", "ROLES",
           # the embedded default model (playpen.default_model)
           "DEFAULT_MODEL", "MARKER_FILE", "MODELS_DIR_ENV", "check_model_dir", "default_model_dir",
           "default_model_registry_entry", "ensure_local_model", "models_dir", "prepare_default_model"]

ROLES = ("learner", "teacher", "partner", "model", "judge")
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")


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
    if not any((path / weights).is_file() for weights in ADAPTER_WEIGHTS):
        raise AdapterError(f"adapter '{adapter}' has adapter_config.json but no weights "
                           f"({' or '.join(ADAPTER_WEIGHTS)}): an interrupted save or copy?")
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


def load_init_adapter(model, adapter: str | Path, *, trainable: bool = True, name: str = "default"):
    """``model`` with the PEFT adapter of folder ``adapter`` on it (checked first, so that a
    wrong folder is one line naming what is missing, not peft's traceback): the one way a
    trainer starts from an adapter — ``--init-adapter``, a resumed checkpoint, the previous
    round's or stage's. peft puts the adapter's layers into ``model`` itself; the returned
    ``PeftModel`` is the wrapper to train (``trainable``: its LoRA weights take gradients)."""
    from peft import PeftModel
    return PeftModel.from_pretrained(model, str(check_adapter(adapter)), adapter_name=name, is_trainable=trainable)


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
    """Resolve `name` and check what it needs without loading anything: a known backend, a
    local folder that exists (and a registered adapter that is one), credentials; a learner
    must be a local HF model. Returns the registry entry."""
    entry = registry.resolve_model(name)
    check_backend_for(entry)
    if role == "learner" and entry.backend != "huggingface_local":
        raise PlaypenError(f"the learner must be a huggingface_local model; '{name}' uses "
                           f"backend '{entry.backend}'")
    _check_local_files(entry)
    check_key_for(entry)
    return entry


def _check_local_files(entry) -> None:
    """A huggingface_id that is a path must be a folder (the embedded model's is prepared on
    use); a registered ``peft_model`` must be an adapter folder."""
    if entry.backend != "huggingface_local":
        return
    model_id = str(entry.spec.get("huggingface_id", ""))
    # a hub id is NAME or ORG/NAME; anything else is a path
    is_path = os.path.isabs(model_id) or model_id.startswith((".", "~")) or model_id.count("/") > 1
    path = Path(model_id).expanduser()
    if is_path and not path.is_dir() and managed_folder(entry) is None:
        raise RegistryError(f"model '{entry.name}' ({entry.source}): huggingface_id '{model_id}' is "
                            f"{'a file' if path.exists() else 'no folder'}: a local model needs its folder "
                            f"(a hub id has the form ORG/NAME)")
    if is_path and path.is_dir() and managed_folder(entry) is None:
        check_model_folder(path, f"model '{entry.name}' ({entry.source})")
    adapter = (entry.spec.get("model_config") or {}).get("peft_model")
    if adapter:
        check_adapter(adapter)


MODEL_WEIGHTS = ("*.safetensors", "*.bin", "*.pt", "*.pth", "*.h5", "*.msgpack")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model")


def check_model_folder(path: Path, what: str) -> None:
    """A local Hugging Face model folder has a readable config.json, weights and a
    tokenizer: else one RegistryError naming the file (transformers' own error on a
    malformed config.json is a ~100-line traceback)."""
    import json
    config = path / "config.json"
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RegistryError(f"{what}: {path} has no config.json: not a Hugging Face model folder "
                            f"(an interrupted copy or save?)") from None
    except OSError as e:
        raise RegistryError(f"{what}: {config}: cannot read: {e.strerror}") from e
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        where = f":{e.lineno}:{e.colno}" if isinstance(e, json.JSONDecodeError) else ""
        raise RegistryError(f"{what}: {config}{where}: not valid JSON ({getattr(e, 'msg', e)}): a half-written "
                            f"or edited file?") from e
    if not isinstance(data, dict):
        raise RegistryError(f"{what}: {config}: expected a JSON object, got {type(data).__name__}")
    if not any(next(path.glob(pattern), None) is not None for pattern in MODEL_WEIGHTS):
        raise RegistryError(f"{what}: {path} has config.json but no weights ({', '.join(MODEL_WEIGHTS)}): "
                            f"an interrupted copy or save?")
    for index in path.glob("*.index.json"):  # sharded weights: every shard it names is there
        try:
            shards = set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values())
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise RegistryError(f"{what}: {index}: not a weights index ({type(e).__name__}: {e})") from e
        missing = sorted(str(shard) for shard in shards if not (path / str(shard)).is_file())
        if missing:
            raise RegistryError(f"{what}: {index} names {len(missing)} missing shard(s), e.g. {path / missing[0]}: "
                                f"an interrupted copy or download?")
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        raise RegistryError(f"{what}: {path} has no tokenizer ({', '.join(TOKENIZER_FILES)}): save the "
                            f"tokenizer into the folder (tokenizer.save_pretrained)")


def check_key_for(entry, cwd: Path | None = None) -> None:
    """A remote backend needs a key.json entry (cwd, else ~/.clemcore/); name the missing or
    malformed field, never its value."""
    if not entry.is_remote:
        return
    cwd = Path(cwd or Path.cwd())
    candidates = [cwd / KEY_FILE, Path.home() / ".clemcore" / KEY_FILE]
    key_file = next((p for p in candidates if p.exists()), None)
    if key_file is None:
        raise _missing_key(entry, f"no key.json found (looked in {candidates[0]} and {candidates[1]}); "
                                  f"it needs the field '{entry.backend}.api_key'")
    keys = read_json(key_file)
    if not isinstance(keys, dict):
        raise RegistryError(f"{key_file}: must be a JSON object keyed by backend name")
    backend_keys = keys.get(entry.backend)
    if not isinstance(backend_keys, dict):
        raise _missing_key(entry, f"{key_file} has no '{entry.backend}' entry")
    required = ["api_key"] + (["base_url"] if entry.backend == "openai_compatible" else [])
    for name in required:
        if not backend_keys.get(name):
            raise _missing_key(entry, f"{key_file}: field '{entry.backend}.{name}' is missing or empty")
        if not isinstance(backend_keys[name], str):
            raise RegistryError(f"{key_file}: field '{entry.backend}.{name}' is a {type(backend_keys[name]).__name__}, "
                                f"expected a string")
    base_url = backend_keys.get("base_url")
    if base_url is not None:
        from urllib.parse import urlparse
        parsed = urlparse(base_url) if isinstance(base_url, str) else None
        if parsed is None or parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise RegistryError(f"{key_file}: field '{entry.backend}.base_url' is not an http(s) URL "
                                f"(e.g. http://127.0.0.1:8000/v1)")


def backend_names(cwd: Path | None = None) -> list[str]:
    """The backends a model entry may name: clemcore's packaged ``*_api.py`` files, those in
    the working directory, and the built-in programmatic and human players."""
    import importlib.util
    spec = importlib.util.find_spec("clemcore")
    folders = [Path(list(spec.submodule_search_locations)[0]) / "backends"] if spec else []
    folders.append(Path(cwd or Path.cwd()))
    names = {p.name[: -len("_api.py")] for folder in folders for p in folder.glob("*_api.py")}
    return sorted(names | {"_player_programmed", "_player_human"})


def check_backend_for(entry, cwd: Path | None = None) -> None:
    """RegistryError when the entry names a backend that does not exist (close matches)."""
    names = backend_names(cwd)
    if entry.backend not in names:
        raise RegistryError(f"model '{entry.name}' ({entry.source or 'registry'}): unknown backend "
                            f"'{entry.backend}'.{close_matches(entry.backend, names)} "
                            f"See `playpen list backends`.")


def _missing_key(entry, detail: str):
    return MissingKeyError(f"model '{entry.name}' (backend {entry.backend}) needs credentials: {detail}. "
                           f"See key.json.template.")


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
    # a data-parallel rank loads its own copy onto its own device (GPU LOCAL_RANK, or the CPU)
    return load_model(model_spec, dict(gen_args or dict(temperature=0.0, max_tokens=300)),
                      device_map=device_map() if entry.backend == "huggingface_local" else None)
