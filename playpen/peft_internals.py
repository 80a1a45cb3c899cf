"""What playpen reads and writes inside peft's LoRA layers: the one module that touches
peft's private surface (tested with peft 0.21, the range pinned in pyproject.toml; widen it
when a newer peft passes ``tests/test_library_surfaces.py``, which checks every name below).

peft's public API loads, saves and switches adapters; two of playpen's decoders go further,
for speed, and need a LoRA layer's parts:

- the mixed-adapter forward (:mod:`playpen.inference.mixed_lora`) stacks the A and B weights
  of a layer's adapters and answers a batch whose rows name different adapters itself:
  ``lora_A``/``lora_B`` (their weights, made views of the stacks), ``scaling``, the checks
  that an adapter is plain LoRA (``lora_variant``, ``use_dora``, ``lora_bias``,
  ``lora_dropout``), ``merged_adapters``, ``disable_adapters``, ``base_layer``, and
  ``peft.tuners.lora.layer.VARIANT_KWARG_KEYS`` (keywords of a variant's forward);
- :func:`set_lora_dropout` replaces the dropout modules of every LoRA layer (``lora_dropout``)
  of an adapter a trainer continues;
- the static decoder (:mod:`playpen.inference.static`) decodes with an adapter merged into a
  copy of the base weights: ``active_adapters``, ``merged``, ``get_base_layer()``,
  ``get_delta_weight(name)`` and, while the copy is in place, the layer's private
  ``_disable_adapters`` switch (the public ``enable_adapters`` also changes which weights
  require gradients, which a decoder between training steps must not do).

Imports nothing heavy at the top: peft and torch are imported where a function needs them.
"""
from __future__ import annotations

import functools
import re
from typing import Any, Optional


def lora_linear_class() -> Optional[type]:
    """peft's LoRA ``Linear`` layer class (None without peft)."""
    try:
        from peft.tuners.lora.layer import Linear
    except ImportError:
        return None
    return Linear


@functools.lru_cache(maxsize=1)
def variant_kwarg_keys() -> tuple:
    """The keywords a LoRA variant's forward takes (a batch carrying any goes to peft)."""
    try:
        from peft.tuners.lora.layer import VARIANT_KWARG_KEYS
    except ImportError:  # an older peft: no variant keywords
        return ()
    return tuple(VARIANT_KWARG_KEYS)


def lora_layers(model: Any) -> list:
    """Every peft LoRA layer of ``model`` (none without peft)."""
    try:
        from peft.tuners.lora import LoraLayer
    except ImportError:
        return []
    return [m for m in model.modules() if isinstance(m, LoraLayer)]


# ----------------------------------------------------------------------------- one layer's adapters

def adapter_names(layer) -> list:
    """The names of the layer's LoRA adapters."""
    return list(layer.lora_A.keys())


def adapter_weights(layer, name: str):
    """``(A, B)``: the weights of adapter ``name`` (``A [r, in]``, ``B [out, r]``)."""
    return layer.lora_A[name].weight, layer.lora_B[name].weight


def adapter_scaling(layer, name: str) -> float:
    """The factor peft multiplies adapter ``name``'s ``B(A x)`` by (alpha / r)."""
    return float(layer.scaling[name])


def plain_adapters(layer) -> dict:
    """``{name: (A, B)}`` of the layer's adapters that are plain LoRA: no variant (DoRA and
    others), no LoRA bias, no dropout active, both weights ordinary parameters (not DTensors,
    quantised or meta weights)."""
    import torch
    plain = {}
    for name, lora_a in layer.lora_A.items():
        lora_b = layer.lora_B[name] if name in layer.lora_B else None
        if lora_b is None or name in getattr(layer, "lora_variant", {}) or layer.use_dora.get(name, False):
            continue
        if layer.lora_bias.get(name, False) or getattr(lora_a, "bias", None) is not None \
                or getattr(lora_b, "bias", None) is not None:
            continue
        dropout = layer.lora_dropout[name] if name in layer.lora_dropout else None
        if dropout is not None and dropout.training and not isinstance(dropout, torch.nn.Identity):
            continue
        a, b = getattr(lora_a, "weight", None), getattr(lora_b, "weight", None)
        if type(a) is torch.nn.Parameter and type(b) is torch.nn.Parameter:
            plain[name] = (a, b)
    return plain


def adapters_bypassed(layer) -> bool:
    """The layer's adapters take no part in its forward: merged into the base weights, or
    disabled."""
    return bool(layer.merged_adapters or layer.disable_adapters)


def base_forward(layer, x, *args, **kwargs):
    """The adapted layer's own forward, without any adapter."""
    return layer.base_layer(x, *args, **kwargs)


# ----------------------------------------------------------------------------- merging for decoding

def mergeable_adapter(layer, adapter: Optional[str]) -> Optional[str]:
    """The adapter a merged copy of ``layer``'s weights would hold — ``adapter``, or with
    None the layer's one active adapter; ``"__base__"``: none — or None where it cannot be
    merged (several active adapters, DoRA, LoRA on other than a linear layer, already merged)."""
    linear = lora_linear_class()
    name = adapter if adapter is not None else (layer.active_adapters[0] if len(layer.active_adapters) == 1
                                                else None)
    if name is None or linear is None or not isinstance(layer, linear) or layer.merged \
            or (name != "__base__" and (name not in layer.lora_A or layer.use_dora.get(name))):
        return None
    return name


def base_weight(layer):
    """The weight of the layer the adapters adapt."""
    return layer.get_base_layer().weight


def delta_weight(layer, name: str):
    """What adapter ``name`` adds to the base weight (``scaling · B A``)."""
    return layer.get_delta_weight(name)


def set_adapters_disabled(layer, disabled: bool) -> bool:
    """Switch the layer's adapters off (or back on) for its forward, touching nothing else
    (see the module doc); returns the previous state."""
    before = layer._disable_adapters
    layer._disable_adapters = disabled
    return before


# ----------------------------------------------------------------------------- training options

def set_lora_dropout(model, p: float) -> int:
    """Give every LoRA layer of a peft ``model`` dropout ``p`` (0: none). Returns the
    number of layers changed. An adapter loaded from a checkpoint keeps the dropout it was
    trained with unless told otherwise; GRPO wants none (the trained policy must be the
    one that sampled, and on a CPU dropout nearly doubles the cost of a forward pass:
    benchmarks/lora_dropout.py)."""
    import torch
    if not 0.0 <= p < 1.0:
        raise ValueError(f"LoRA dropout must be in [0, 1), got {p}")
    changed = 0
    for module in model.modules():
        dropouts = getattr(module, "lora_dropout", None)
        if isinstance(dropouts, torch.nn.ModuleDict):
            for name in list(dropouts.keys()):
                dropouts[name] = torch.nn.Dropout(p) if p > 0 else torch.nn.Identity()
                changed += 1
    return changed


_LORA_PARAMETER = re.compile(r"\.lora_[AB]\.([^.]+)\.")  # "...q_proj.lora_A.default.weight" -> "default"


def trained_adapters(model) -> set[str]:
    """The names of the LoRA adapters of ``model`` whose weights the optimizer updates (a
    trainable ``lora_A``/``lora_B`` parameter): the adapters a run trains, not its frozen
    references or past snapshots."""
    return {m.group(1) for name, p in model.named_parameters()
            if p.requires_grad and (m := _LORA_PARAMETER.search(name))}
