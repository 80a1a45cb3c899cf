"""Full fine-tuning behind ``--engine vllm``: the learner's base weights pushed into the
running in-process vLLM engine whenever they changed, before the next generation.

Why this shape (vLLM 0.32): the engine core runs in a spawned process, so the trainer cannot
write into vLLM's model as TRL's colocate mode does (``model.load_weights`` on the model
object). ``LLM.collective_rpc`` calls a method by name on every worker; :class:`WeightReceiver`
is mixed into vLLM's worker (``worker_extension_cls``) to give it three: begin, load a chunk,
end. Tensors travel as raw bytes (vLLM's message codec carries bytes without pickle), in
chunks of whole decoder layers of at most :data:`CHUNK_BYTES`, so neither side ever holds a
second copy of the whole model. The worker loads them through vLLM's layer-wise reload
(``initialize_layerwise_reload`` ... ``finalize_layerwise_reload``, what
``Worker.reload_weights`` runs), not ``model.load_weights`` alone: on a CPU vLLM repacks each
linear layer's weight for oneDNN after loading, and a plain in-place copy would never reach
the packed copy the kernels read. A layer is processed once all its weights arrived (q, k, v
fuse into one), which is why a chunk never splits a decoder layer.

Afterwards vLLM's prefix cache is reset (a prefix computed with the old weights must never
answer a new prompt). Its LoRA adapters stay loaded (``Worker.reload_weights`` drops them):
their tensors live beside the base layers, not in them, so nothing needs reading again. The
private surface of vLLM's worker (its model runner, the layer-wise reload) is touched here only. Tests: tests/test_vllm_weights.py, tests/test_vllm_engine.py.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional, Sequence

CHUNK_BYTES = 256 * 2**20  # one collective_rpc's tensors at most (a layer larger than this goes alone)
BASE_SAMPLE = 4096  # values of each base tensor read into its digest (full fine-tuning changes nearly all)
_LAYER = re.compile(r"^(.*?\.\d+)\.")  # "model.layers.3.mlp.up_proj.weight" -> "model.layers.3"


def base_weights(model: Any) -> Iterator[tuple[str, Any]]:
    """The base weights of ``model`` (a transformers model or a peft model around one) under
    the names of its checkpoint, which vLLM's ``load_weights`` maps to its own: peft's
    ``base_model.model.`` prefix and ``.base_layer`` dropped, LoRA tensors and the trained
    copies of ``modules_to_save`` left out (they belong to adapters), their originals kept.
    A tied output embedding appears once (as the input embedding), as in a checkpoint."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    for name, p in base.named_parameters():
        if "lora_" in name or ".modules_to_save." in name:
            continue
        yield name.replace(".base_layer.", ".").replace(".original_module.", "."), p.detach()


def digest(named: Iterable[tuple[str, Any]], sample: Optional[int] = BASE_SAMPLE) -> str:
    """A digest of the named tensors' values (as float32): the first ``sample`` of each, or
    all (None). Read from the values: torch's version counters miss fused optimizer steps
    (``AdamW(fused=True)``, transformers' default, leaves them as they were)."""
    h = hashlib.blake2b(digest_size=16)
    for name, tensor in named:
        values = tensor.detach().reshape(-1)
        h.update(name.encode())
        h.update((values if sample is None else values[:sample]).float().cpu().numpy().tobytes())
    return h.hexdigest()


def folder_digest(folder: str, names: Sequence[str]) -> Optional[str]:
    """:func:`digest` of ``names`` as stored in the safetensors files of ``folder`` (what vLLM
    loaded), reading only their first values; None when a name is not found there."""
    from safetensors import safe_open
    files = sorted(Path(folder).glob("*.safetensors"))
    where: dict = {}
    handles = [safe_open(str(f), framework="pt") for f in files]
    for handle in handles:
        for key in handle.keys():
            where.setdefault(key, handle)
    if not all(name in where for name in names):
        return None

    def first_values(name):
        piece = where[name].get_slice(name)
        shape = piece.get_shape()
        row = 1
        for size in shape[1:]:
            row *= size
        return piece[:-(-BASE_SAMPLE // max(row, 1))] if shape else where[name].get_tensor(name)
    return digest((name, first_values(name)) for name in names)


def layer_chunks(named: Iterable[tuple[str, Any]], max_bytes: int = CHUNK_BYTES) -> Iterator[list]:
    """``(name, tensor)`` pairs grouped into chunks of whole layers (all tensors under one
    ``...layers.N.``), each at most ``max_bytes`` unless one layer alone is larger."""
    chunk: list = []
    size = 0
    layer: Optional[str] = None
    group: list = []

    def close_group():
        nonlocal chunk, size
        group_bytes = sum(t.numel() * t.element_size() for _, t in group)
        if chunk and size + group_bytes > max_bytes:
            yield chunk
            chunk, size = [], 0
        chunk.extend(group)
        size += group_bytes

    for name, tensor in named:
        match = _LAYER.match(name)
        key = match.group(1) if match else name
        if group and key != layer:
            yield from close_group()
            group = []
        layer = key
        group.append((name, tensor))
    if group:
        yield from close_group()
    if chunk:
        yield chunk


def encode(chunk: Sequence[tuple[str, Any]]) -> list:
    """A chunk as vLLM's message codec carries it without pickle: ``[name, dtype, shape, bytes]``."""
    import torch
    out = []
    for name, tensor in chunk:
        flat = tensor.detach().to("cpu").contiguous().reshape(-1)
        out.append([name, str(tensor.dtype).replace("torch.", ""), list(tensor.shape),
                    flat.view(torch.uint8).numpy().tobytes()])
    return out


def decode(encoded: Sequence[Sequence]) -> list:
    """The ``(name, tensor)`` pairs of an :func:`encode` d chunk."""
    import torch
    return [(name, torch.frombuffer(bytearray(data), dtype=torch.uint8).view(getattr(torch, dtype)).reshape(shape))
            for name, dtype, shape, data in encoded]


def push(llm: Any, named: Iterable[tuple[str, Any]], max_bytes: int = CHUNK_BYTES) -> int:
    """Load ``named`` (checkpoint names) into a running ``vllm.LLM`` built with
    ``worker_extension_cls=WORKER_EXTENSION``, then reset its prefix cache; the number of
    chunks sent."""
    sent = 0
    llm.collective_rpc("playpen_begin_weights")
    for chunk in layer_chunks(named, max_bytes):
        llm.collective_rpc("playpen_load_weights", args=(encode(chunk),))
        sent += 1
    llm.collective_rpc("playpen_end_weights")
    if not llm.reset_prefix_cache():
        raise RuntimeError("vLLM did not reset its prefix cache after a weight update (requests still running)")
    return sent


WORKER_EXTENSION = f"{__name__}.WeightReceiver"


class WeightReceiver:
    """Mixed into vLLM's worker (inside the engine core's process): one weight update is
    ``playpen_begin_weights``, any number of ``playpen_load_weights``, ``playpen_end_weights``."""

    def playpen_begin_weights(self) -> None:
        from vllm.config import set_current_vllm_config
        from vllm.model_executor.model_loader.reload import layerwise
        with set_current_vllm_config(self.vllm_config):
            layerwise.initialize_layerwise_reload(self.model_runner.get_model())

    def playpen_load_weights(self, encoded: list) -> None:
        from vllm.config import set_current_vllm_config
        with set_current_vllm_config(self.vllm_config):
            self.model_runner.get_model().load_weights(decode(encoded))

    def playpen_end_weights(self) -> None:
        import logging
        from vllm.config import set_current_vllm_config
        from vllm.model_executor.model_loader.reload import layerwise
        model = self.model_runner.get_model()
        # layers without checkpoint weights (rotary caches, a tied output embedding) get their
        # old tensors back, each with a "Failed to load weights" warning: expected here
        quiet = logging.getLogger(layerwise.__name__)
        level = quiet.level
        quiet.setLevel(logging.ERROR)
        try:
            with set_current_vllm_config(self.vllm_config):
                layerwise.finalize_layerwise_reload(model, self.vllm_config.model_config)
                # a tied output embedding shares the new input embedding's tensor, but on a CPU
                # vLLM 0.32 computes from a packed copy of it (cpu_linear) that the reload
                # skipped: pack every layer that kept its weight again
                for module in model.modules():
                    weight = module._parameters.get("weight")
                    method = getattr(module, "quant_method", None)
                    if hasattr(module, "cpu_linear") and method is not None and weight is not None and weight.numel():
                        method.process_weights_after_loading(module)
        finally:
            quiet.setLevel(level)


class BaseWeights:
    """Which base weights the engine holds, and the push when the learner's differ: before
    every generation the learner's base digest is compared with the engine's, so no
    generation samples from stale weights and unchanged weights cost a digest, no push."""

    def __init__(self, backend: Any, folder: Optional[str]):
        self.backend = backend
        self.folder = folder  # what the engine loaded; None: unknown (a server's own)
        self.held: Optional[str] = None  # the digest of the weights the engine holds
        self.pushes = 0

    def follow(self, model: Any) -> None:
        version = digest(base_weights(model))
        if self.held is None:
            # the engine holds its folder's weights: read their digest (a server's folder is
            # not ours to read: the first learner it serves is taken as loaded from it)
            names = [name for name, _ in base_weights(model)]
            self.held = folder_digest(self.folder, names) if self.folder else version
        if version == self.held:
            return
        self.backend.load_base(base_weights(model))
        self.held = version
        self.pushes += 1
