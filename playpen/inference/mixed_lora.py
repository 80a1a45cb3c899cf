"""A faster mixed-adapter forward for peft LoRA models (issue 15, players as adapters).

peft answers a batch whose rows name different adapters (``adapter_names=[...]``) by
running every LoRA layer once per adapter present, on that adapter's rows: on a CPU the
many small matmuls and row copies, not the arithmetic, are what a mixed batch costs. While
:func:`mixed_lora` is active, every plain ``peft.tuners.lora.Linear`` of the model answers
such a forward (inference only: no gradient, eval mode) in a fixed number of operations,
whatever the number of adapters:

- the base layer once for all rows;
- ``h = x @ A_all^T``: the A matrices of the layer's adapters, stacked ``[n, r, in]`` and
  read as one ``[n*r, in]`` matrix, in ONE matmul; each row keeps the ``r`` columns of its
  own adapter (one ``index_select``) times its adapter's scaling (0 for ``"__base__"`` rows
  and for adapters this layer does not have: their delta is exactly zero);
- ``y = h @ B_all^T``: the B matrices stacked ``[n, out, r]`` and read as ``[n*out, r]``,
  ONE matmul; each row keeps the ``out`` columns of its own adapter (one ``index_select``),
  added to the base output.

A forward over many tokens (a prefill of long rows) would make that second product, every
adapter's columns for every token, large; there the layer runs sub-batches instead: the
rows sorted by adapter once per forward (one row gather), then per adapter present its two
matmuls on its slice of the sorted rows and one ``index_add_`` into the base output (peft:
about twice the operations per adapter). ``MAX_STACKED_ELEMENTS`` draws the line.

The stacks cost no memory: the adapters' ``lora_A``/``lora_B`` weights are made views of
them (same values, same parameters, so training, optimisers, ``load_state_dict`` and
saving see the same tensors; each weight stays contiguous). A stack is checked at the start
of every :func:`mixed_lora` session (adapter set, shapes, data pointers: an adapter added,
deleted, reloaded or moved) and rebuilt when it no longer matches; in-place updates (an
optimiser step, ``copy_``) are seen as they happen. Adapters of one layer with different
ranks, dtypes or devices get one stack per kind.

Anything else goes to peft unchanged, layer by layer: a gradient-enabled or training
forward, merged or disabled adapters, a batch naming an adapter with a variant (DoRA,
aLoRA, ...), a LoRA bias or an active dropout, and other LoRA layer types (embeddings,
convolutions, quantised layers). ``PLAYPEN_MIXED_LORA=0`` switches the fast path off (peft
everywhere), as does ``mixed_lora(model, enabled=False)``.
"""
from __future__ import annotations

import functools
import os
import weakref
from contextlib import contextmanager
from typing import Any, Iterator, Optional

from playpen.peft_internals import (adapter_names, adapter_scaling, adapter_weights, adapters_bypassed, base_forward,
                                    lora_linear_class, plain_adapters, variant_kwarg_keys)

ENABLED = os.environ.get("PLAYPEN_MIXED_LORA", "1").strip() not in ("0", "false", "no", "off")
"""Whether :func:`mixed_lora` uses the stacked path (``PLAYPEN_MIXED_LORA=0``: peft's)."""

MAX_STACKED_ELEMENTS = 1 << 19
"""The largest ``tokens x adapters spanned x out`` product the stacked path makes in one
layer; a larger forward (a prefill) runs sub-batches by adapter, whose matmuls are big
enough for their count not to matter."""

BASE = "__base__"

# module -> {kind key: _Stack}; weak, so a dropped model takes its stacks along
_STACKS: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()


class _Stack:
    """The A and B weights of a layer's adapters of one kind (rank, dtype, device):
    ``A [n, r, in]`` and ``B [n, out, r]``; the adapters' weights are views of them."""

    __slots__ = ("names", "index", "A", "B", "A_flat", "B_flat", "rank", "scales", "layout")

    def __init__(self, names: tuple, A, B):
        self.names, self.A, self.B = names, A, B
        self.A_flat, self.B_flat = A.view(-1, A.shape[2]), B.view(-1, B.shape[2])  # [n*r, in], [n*out, r]
        self.index = {name: i for i, name in enumerate(names)}
        self.rank = A.shape[1]
        self.scales: tuple = ()
        self.layout = 0

    def matches(self, module, names: tuple) -> bool:
        if names != self.names:
            return False
        for i, name in enumerate(names):
            a, b = adapter_weights(module, name)
            if (a.data_ptr() != self.A[i].data_ptr() or b.data_ptr() != self.B[i].data_ptr()
                    or a.shape != self.A.shape[1:] or b.shape != self.B.shape[1:]
                    or a.dtype != self.A.dtype or b.dtype != self.B.dtype
                    or a.device != self.A.device or b.device != self.B.device):
                return False
        return True


def _plain_adapters(module) -> dict:
    """The layer's adapters the stacked path can answer, by kind ``(rank, dtype, device)``;
    the others (variants, a LoRA bias, an active dropout, odd weights) are left out and send
    any batch naming them to peft."""
    kinds: dict = {}
    for name, (a, b) in plain_adapters(module).items():
        if a.dim() != 2 or b.dim() != 2 or a.shape[0] != b.shape[1] or a.dtype != b.dtype \
                or a.device != b.device or a.device.type == "meta" or not a.dtype.is_floating_point:
            continue
        kinds.setdefault((a.shape[0], a.dtype, a.device), []).append(name)
    return {kind: tuple(names) for kind, names in kinds.items()}


def _build(module, names: tuple) -> _Stack:
    """A new stack holding ``names``' current weights; the weights become its views."""
    import torch
    first_a, first_b = adapter_weights(module, names[0])
    A = torch.empty((len(names),) + tuple(first_a.shape), dtype=first_a.dtype, device=first_a.device)
    B = torch.empty((len(names),) + tuple(first_b.shape), dtype=first_b.dtype, device=first_b.device)
    with torch.no_grad():
        for i, name in enumerate(names):
            a, b = adapter_weights(module, name)
            A[i].copy_(a)
            B[i].copy_(b)
            a.data = A[i]
            b.data = B[i]
    return _Stack(names, A, B)


def stacks_of(module) -> list:
    """The layer's stacks, checked and (re)built as needed (see the module doc)."""
    kinds = _plain_adapters(module)
    old = _STACKS.get(module, {})
    new = {}
    for kind, names in kinds.items():
        stack = old.get(kind)
        new[kind] = stack if stack is not None and stack.matches(module, names) else _build(module, names)
    _STACKS[module] = new
    return list(new.values())


class _Session:
    """One :func:`mixed_lora` activation: each layer's stacks and layout, and the row
    plans (gather indices, per-row scalings) shared by the layers of one layout."""

    def __init__(self):
        self.layer: dict = {}   # module -> (stacks, unsupported names, layout id)
        self.layouts: dict = {}  # layout key -> id
        self.plans: dict = {}
        self.names_obj: Any = None
        self.names_key: tuple = ()
        self.variant_keys: tuple = variant_kwarg_keys()

    def prepare(self, module) -> None:
        stacks = stacks_of(module)
        supported = set()
        for stack in stacks:
            stack.scales = tuple(adapter_scaling(module, name) for name in stack.names)
            supported.update(stack.names)
        unsupported = frozenset(name for name in adapter_names(module) if name not in supported)
        key = (tuple((s.names, s.scales, s.rank, s.A.shape[2], s.B.shape[1], s.A.dtype, s.A.device) for s in stacks),
               unsupported)
        layout = self.layouts.setdefault(key, len(self.layouts))
        for stack in stacks:
            stack.layout = layout
        self.layer[module] = (stacks, unsupported, layout)

    def plan(self, module, names, rows: int, tokens: int):
        """How the layer computes this forward's LoRA deltas; shared by the layers of one
        layout. None: peft does; (): no row has a delta; ("stacked", [per stack with rows:
        its position, first and last + 1 adapter index spanned, whether that is the whole
        stack, each token's row in h and y, each token's scaling]); ("segments", rows sorted
        by adapter, [per adapter present: stack position, its index there, its slice of the
        sorted rows, its scaling, its rows])."""
        if names is not self.names_obj:  # peft hands every layer the same list per forward
            self.names_obj, self.names_key = names, tuple(names)
        stacks, unsupported, layout = self.layer[module]
        key = (self.names_key, rows, tokens, layout)
        if key in self.plans:
            return self.plans[key]
        self.plans[key] = plan = self._make_plan(stacks, unsupported, self.names_key, rows, tokens)
        return plan

    @staticmethod
    def _make_plan(stacks, unsupported, names: tuple, rows: int, tokens: int):
        import torch
        if len(names) != rows or any(name in unsupported for name in names):
            return None
        found = []  # per stack with rows: its position, each row's adapter index there (None: not there)
        for position, stack in enumerate(stacks):
            where = [stack.index.get(name) for name in names]
            if any(i is not None for i in where):
                found.append((position, where))
        if not found:
            return ()
        device = stacks[0].A.device
        stacked = []
        for position, where in found:
            stack = stacks[position]
            present = [i for i in where if i is not None]
            lo, hi = min(present), max(present) + 1
            span = hi - lo
            if span > 2 * len(set(present)) + 2 or \
                    rows * tokens * span * max(stack.B.shape[1], stack.rank) > MAX_STACKED_ELEMENTS:
                break  # mostly other adapters' columns, or a big forward: by sub-batches
            local = torch.tensor([(i - lo) if i is not None else 0 for i in where], dtype=torch.long)
            scale = torch.tensor([stack.scales[i] if i is not None else 0.0 for i in where], dtype=stack.A.dtype)
            pick = torch.arange(rows * tokens, dtype=torch.long) * span + local.repeat_interleave(tokens)
            full = lo == 0 and hi == len(stack.names)
            stacked.append((position, lo, hi, full, pick.to(device), scale.repeat_interleave(tokens)[:, None].to(device)))
        else:
            return ("stacked", stacked)
        # sub-batches: rows sorted by adapter, one slice (and two matmuls) per adapter present
        order, segments = [], []
        for position, where in found:
            stack = stacks[position]
            for i in sorted({i for i in where if i is not None}):
                rows_of = [row for row, j in enumerate(where) if j == i]
                segments.append((position, i, len(order), len(order) + len(rows_of), stack.scales[i],
                                 torch.tensor(rows_of, dtype=torch.long, device=device)))
                order.extend(rows_of)
        return ("segments", torch.tensor(order, dtype=torch.long, device=device), segments)


def _forward(session: _Session, module, original, x, *args, **kwargs):
    import torch
    names = kwargs.get("adapter_names")
    if (names is None or x.dim() < 2 or torch.is_grad_enabled() or module.training or adapters_bypassed(module)
            or module not in session.layer
            or any(kwargs.get(k) is not None for k in session.variant_keys)):
        return original(x, *args, **kwargs)
    rows, features = x.shape[0], x.shape[-1]
    plan = session.plan(module, names, rows, x.numel() // max(1, rows * features))
    if plan is None:
        return original(x, *args, **kwargs)
    del kwargs["adapter_names"]
    for k in session.variant_keys:
        kwargs.pop(k, None)
    result = base_forward(module, x, *args, **kwargs)
    if not plan:
        return result
    stacks = session.layer[module][0]
    linear = torch.nn.functional.linear
    if plan[0] == "stacked":
        out = result.shape[-1]
        delta = None
        for position, lo, hi, full, pick, scale in plan[1]:
            stack = stacks[position]
            xs = x if x.dtype == stack.A.dtype else x.to(stack.A.dtype)
            r = stack.rank
            a = stack.A_flat if full else stack.A[lo:hi].view(-1, features)
            b = stack.B_flat if full else stack.B[lo:hi].view(-1, r)
            h = linear(xs, a).view(-1, r).index_select(0, pick).mul_(scale)   # each token's own adapter's r
            y = linear(h, b).view(-1, out).index_select(0, pick)              # each token's own adapter's out
            delta = y if delta is None else delta.add_(y)
        result += delta.view(result.shape) if delta.dtype == result.dtype else delta.view(result.shape).to(result.dtype)
        return result
    _, order, segments = plan
    xs = x.index_select(0, order)
    for position, i, start, end, scale, rows_of in segments:
        stack = stacks[position]
        part = xs[start:end]
        if part.dtype != stack.A.dtype:
            part = part.to(stack.A.dtype)
        y = linear(linear(part, stack.A[i]).mul_(scale), stack.B[i])
        result.index_add_(0, rows_of, y if y.dtype == result.dtype else y.to(result.dtype))
    return result


@contextmanager
def mixed_lora(model: Any, enabled: Optional[bool] = None) -> Iterator[int]:
    """While active, ``model``'s plain peft LoRA linear layers answer forwards with
    per-row ``adapter_names`` by the stacked path (see the module doc); yields the number
    of layers that got it (0: peft everywhere). Pass ``adapter_names`` to the model as
    usual: peft still checks the names and hands them to every layer."""
    linear = lora_linear_class()
    if not (ENABLED if enabled is None else enabled) or linear is None:
        yield 0
        return
    import torch
    session = _Session()
    installed = []
    try:
        with torch.no_grad():
            for module in model.modules():
                # exactly peft's Linear (not its quantised subclasses), and no one else's forward override
                if type(module) is not linear or "forward" in module.__dict__:
                    continue
                session.prepare(module)
                original = type(module).forward.__get__(module)
                module.forward = functools.partial(_forward, session, module, original)
                installed.append(module)
        yield len(installed)
    finally:
        for module in installed:
            module.__dict__.pop("forward", None)
