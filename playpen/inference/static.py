"""Decoding over a pre-allocated KV cache, each step replayed as a captured CUDA graph.

Longer than 400 lines: the decoder and its bucket steps share private state (buffers, graph
pool, merged weights, the compiled function and its fallback); the step (``_Step``,
``_logits``, the slot layer) is where it would split next.

Why: at the sizes researchers train (0.5-4B) one decode step of a batch reads the weights
and the rows' keys and values once; on an H100/H200 that takes a millisecond or two, while
transformers' eager forward launches ~20 kernels per layer from Python and a growing
``DynamicCache`` copies or re-views every layer's cache each step. Launch overhead, not
memory bandwidth, then bounds decoding (benchmarks/scale.py measures both). Here:

- every row's keys and values live in one buffer per layer, ``[rows, kv_heads, length,
  head_dim]``, written in place; row ``s`` holds its tokens left-aligned in columns
  ``0 .. pos[s]`` (no padding: its position id is its column), so one step writes column
  ``pos[s]`` of every row and attends to columns ``<= pos[s]``;
- one step (the model's forward for one token per row, with a 4-D mask built from ``pos``)
  is captured per (row bucket, column bucket) as a CUDA graph on first use and replayed
  afterwards: a handful of launches instead of hundreds; columns are bucketed so that a
  step reads only as many positions as its longest row needs;
- finished rows leave: their slot stops counting at once, and when the live rows fit a
  smaller row bucket they are moved to the front and the smaller graph takes over.

The same loop runs without graphs (on a CPU, or with ``graphs=False``): that is what the
fast tests compare token for token with the dynamic-cache loop of
:mod:`playpen.inference.dynamic`. Sampling, logprobs and stopping are that loop's own
(:func:`playpen.inference.sampling.choose_tokens`), applied to the replayed step's logits.

A peft model's LoRA adapter is merged into a copy of the weights it adapts for decoding
(on a GPU by default): unmerged, every adapted linear layer adds five small kernels (casts,
two rank-r products, a scale, an add) to each step, and at 1.7B those ~1,000 tiny kernels
per step, not the weights' bytes, bounded the captured steps. The copy is refreshed from
the current weights at every call (the adapter trains between calls); the merged product
is rounded once to the weights' dtype, as a serving engine's merged adapter is.

``SamplingConfig(compile_decode=True)`` compiles the step with ``torch.compile`` (inductor)
before it is captured (off by default until it is measured on a GPU). Why: at 1.7B on an H200
a captured step was still ~240 elementwise kernels of 3-5 us (RMSNorm, rotary, SiLU x gate,
residual adds), longer together than reading the weights; inductor fuses them. How:

- inductor's default mode, and this module's own capture of the compiled step, not
  ``mode="reduce-overhead"``: that mode's CUDA graphs skip a graph whose inputs it mutates
  (pytorch/pytorch#120733; every step writes the KV buffers in place) and would keep a second
  pool and copy the inputs beside this module's; the ``max-autotune`` modes tune each matmul
  for minutes per shape, and the matmuls here are cuBLAS's at the bound already;
- the step compiles in a warm-up before the capture (a capture cannot compile) and only there;
- shapes are symbolic (``dynamic=True``): one compiled graph serves every (rows, columns)
  bucket, each bucket still captured on its own (vLLM compiles once and captures per size
  too). Dynamo specialises a bucket of one row, so a decoder compiles two graphs (more if
  the model, its dtype or its merged adapter change): ``num_compiles`` counts them, and
  tests/test_static_decoding.py checks that calls of other sizes add none;
- ``fullgraph=True``: a model's forward that Dynamo cannot trace whole, no C++ compiler for
  inductor on a CPU, or Dynamo's recompile limit turn compiling off for the decoder with one
  warning (``compile_error``), and the steps run eager, as a failed capture does.

On a CPU the compiled step runs too (inductor's C++ kernels): that is how the tests check it
gives the eager step's tokens.

Rows of several LoRA adapters in one batch (peft's mixed-batch inference chooses its
kernels per call from the rows' adapter names) and attention implementations other than
``sdpa``/``eager`` (which take no 4-D mask) use the dynamic loop:
:func:`supports_static_decoding` says which, and the door's table chooses
(:func:`playpen.inference.engine.choose_engine`). As an engine behind the door
(:class:`playpen.inference.types.Engine`) it prefills with
:func:`playpen.inference.prefill.prefill_then_decode`, as the dynamic loop does.
"""
from __future__ import annotations

import time
import traceback
import types
import warnings
import weakref
from typing import Any, Optional

from playpen.inference.logprobs import token_logprobs
from playpen.inference.model_facts import ModelFacts
from playpen.inference.prefill import prefill_then_decode
from playpen.inference.sampling import check_finite_scores, choose_tokens
from playpen.inference.types import Generation, SamplingConfig
from playpen.peft_internals import base_weight, delta_weight, lora_layers, mergeable_adapter, set_adapters_disabled

# Row buckets: a captured step serves any live row count up to its bucket.
ROW_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
# Column buckets grow by this many positions (a step attends over its bucket's columns).
COLUMN_STEP = 256

CHUNKED = True
PER_ROW_BUDGETS = True


def generate(model, tokenizer, prompts, sampling: SamplingConfig, facts: ModelFacts, *, adapter_names, budgets,
             counts, cache, conversations, share_prefix) -> list[Generation]:
    """The rows continue their conversations' kept caches in ``cache`` and decode in the
    model's :class:`StaticDecoder` (:class:`playpen.inference.types.Engine`; ``share_prefix``:
    rows without a kept prefix always share theirs)."""
    return prefill_then_decode(static_decoder(model).decode, model, tokenizer, prompts, sampling, facts,
                               adapter_names, budgets, counts, cache, conversations)


def _bucket_rows(n: int) -> int:
    for size in ROW_BUCKETS:
        if n <= size:
            return size
    return -(-n // ROW_BUCKETS[-1]) * ROW_BUCKETS[-1]


def _bucket_columns(n: int) -> int:
    return -(-n // COLUMN_STEP) * COLUMN_STEP


def supports_static_decoding(model: Any, adapters: Optional[list] = None, facts: Optional[ModelFacts] = None) -> bool:
    """Whether :class:`StaticDecoder` can decode for ``model``: a plain per-layer KV cache
    (see :func:`playpen.inference.transformers_compat.supports_kv_reuse`), an attention
    implementation that takes a 4-D mask, and rows of one adapter. ``facts``: the door's
    :class:`~playpen.inference.model_facts.ModelFacts` of this call (None: read here)."""
    if adapters is not None and len(set(adapters)) > 1:
        return False
    facts = facts if facts is not None else ModelFacts(model)
    return facts.attention in ("sdpa", "eager") and facts.kv_reuse


def _slot_layer_class():
    from transformers.cache_utils import DynamicLayer

    class SlotLayer(DynamicLayer):
        """One layer's view of the decoder's buffers for a (rows, columns) bucket: an
        update writes each row's new key and value at column ``pos[row]`` and returns the
        bucket's columns."""

        def __init__(self, keys, values, rows, positions, columns):
            super().__init__()
            self.device = keys.device
            self.is_initialized = True
            # the whole buffers and index tensors (rows, positions, columns): the bucket's view
            # is cut from them where it is read, so that a compiled step sees one input per
            # buffer (a view made beforehand would be a second input aliasing it, which
            # torch.compile handles by copying the whole buffer each step)
            self._keys, self._values, self._rows, self._positions, self._columns = \
                keys, values, rows, positions, columns

        @property
        def keys(self):
            return self._keys[:self._rows.shape[0], :, :self._columns.shape[0]]

        @keys.setter
        def keys(self, value):  # only the base class's __init__ assigns (None)
            pass

        @property
        def values(self):
            return self._values[:self._rows.shape[0], :, :self._columns.shape[0]]

        @values.setter
        def values(self, value):
            pass

        def update(self, key_states, value_states, *args, **kwargs):
            self._keys[self._rows, :, self._positions] = key_states[:, :, -1]
            self._values[self._rows, :, self._positions] = value_states[:, :, -1]
            return self.keys, self.values

    return SlotLayer


_SLOT_LAYER = None


def _logits(step: "_Step"):
    """One decode step of ``step``'s bucket: the model's forward for one token per row, with
    a 4-D mask built from the rows' positions; the last position's logits ``[rows, vocab]``."""
    import torch
    decoder = step.decoder
    visible = (step.column_index[None, :] <= step.positions[:, None])[:, None, None, :]
    if decoder.additive_mask:  # eager attention adds its mask to the scores
        mask = torch.zeros(visible.shape, dtype=decoder.dtype, device=decoder.device)
        mask = mask.masked_fill(~visible, torch.finfo(decoder.dtype).min)
    else:
        mask = visible
    out = decoder.model(input_ids=step.ids, attention_mask=mask, position_ids=step.positions[:, None],
                        use_cache=True, logits_to_keep=1, **{step.cache_key: step.cache},
                        **({} if decoder.merge else step.extra))
    return out.logits[:, -1]


def _compiled_logits(decoder: "StaticDecoder"):
    """``_logits`` compiled by torch.compile with inductor for ``decoder`` (see
    :class:`StaticDecoder`'s ``compile`` notes for the choices)."""
    import torch
    from torch._inductor.compile_fx import compile_fx  # what backend="inductor" calls, counted here

    def inductor(graph, example_inputs):
        compiled = compile_fx(graph, example_inputs)
        decoder.num_compiles += 1  # counted once built: Dynamo may restart a trace from inside it
        return compiled

    # A fresh code object per decoder: Dynamo keeps compiled graphs (and counts recompiles against
    # its limit) per code object, so each model's graphs stay its own and go when it goes.
    code = _logits.__code__.replace()
    fresh = types.FunctionType(code, _logits.__globals__, _logits.__name__)
    return torch.compile(fresh, backend=inductor, dynamic=True, fullgraph=True)


class _Step:
    """One (rows, columns) bucket: static inputs, the step's cache view and, on CUDA, its
    captured graph."""

    def __init__(self, decoder: "StaticDecoder", rows: int, columns: int, adapter: Optional[str],
                 compiled: bool = False):
        import torch
        from transformers import DynamicCache
        global _SLOT_LAYER
        if _SLOT_LAYER is None:
            _SLOT_LAYER = _slot_layer_class()
        self.decoder, self.rows, self.columns, self.compiled = decoder, rows, columns, compiled
        # peft's per-row adapters (one name for every row: its routing is fixed, so capturable)
        self.extra = {} if adapter is None else {"adapter_names": [adapter] * rows}
        device = decoder.device
        self.ids = torch.zeros((rows, 1), dtype=torch.long, device=device)
        self.positions = torch.zeros((rows,), dtype=torch.long, device=device)
        self.row_index = torch.arange(rows, device=device)
        self.column_index = torch.arange(columns, device=device)
        cache = DynamicCache(config=decoder.model.config)
        cache.layers = [_SLOT_LAYER(k, v, self.row_index, self.positions, self.column_index)
                        for k, v in zip(decoder.keys, decoder.values)]
        self.cache = cache
        self.cache_key = decoder.cache_key
        self.graph = None
        self.logits = None

    def _forward(self, compiling: bool = False):
        # the merged weights are swapped in outside the compiled region (Dynamo does not trace
        # assignments to a parameter's ``.data``); what the step reads is the same either way
        with self.decoder.merged():
            if self.compiled and self.decoder.compile_error is None:
                import torch
                # compiling happens in the warm-up only: a later guard that fails (a value the
                # forward reads that changes every step) would recompile every step, so it
                # raises instead and the decoder turns compiling off
                try:
                    with torch.compiler.set_stance("default" if compiling else "fail_on_recompile"):
                        return self.decoder.compiled_logits(self)
                except Exception as error:  # noqa: BLE001 - see StaticDecoder.compile_failed
                    self.decoder.compile_failed(error)
                    self.compiled = False
            return _logits(self)

    def warm_up(self) -> None:
        """Run one step on dummy inputs, compiling it if it is to be compiled. It writes
        garbage at column ``positions`` = the bucket's last column of every slot, which no live
        row has attended yet (a row's columns past its position are never read before it
        writes them)."""
        self.positions.fill_(self.columns - 1)
        self.ids.zero_()
        self._forward(compiling=True)

    def capture(self, pool) -> None:
        """Warm up on a side stream, then capture one step (the warm-up's garbage: see
        :meth:`warm_up`)."""
        import torch
        self.positions.fill_(self.columns - 1)
        self.ids.zero_()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                self._forward()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool):
            self.logits = self._forward()
        self.graph = graph

    def run(self, ids, positions):
        """The step's logits ``[rows, vocab]`` for ``ids``/``positions`` (``[n]``, n <= rows;
        slots past n repeat harmless work on dead columns)."""
        n = ids.shape[0]
        self.ids[:n, 0].copy_(ids)
        self.positions[:n].copy_(positions)
        if n < self.rows:
            self.positions[n:].fill_(self.columns - 1)
        if self.graph is None:
            return self._forward()[:n]
        self.graph.replay()
        return self.logits[:n]


class StaticDecoder:
    """A model's decode buffers and captured steps, kept between calls (see the module doc).

    ``graphs`` None: capture CUDA graphs when the model is on CUDA. The buffers grow when a
    call needs more rows or columns (every captured step is then dropped and re-captured);
    :meth:`release` frees them (e.g. before a memory-hungry training pass)."""

    def __init__(self, model: Any, graphs: Optional[bool] = None, merge_lora: Optional[bool] = None):
        self.model = model
        facts = ModelFacts(model)
        self.device = facts.device
        self.graphs = self.device.type == "cuda" if graphs is None else bool(graphs)
        self.merge_lora = self.graphs if merge_lora is None else bool(merge_lora)
        self.merge = False  # this call's rows decode with merged weights
        self.lora: list = []  # (peft LoRA layer, adapter name, merged weight buffer)
        self.merged_adapter: Optional[str] = None
        self.additive_mask = facts.attention == "eager"
        self.cache_key = ""  # the keyword that hands the forward its cache: from each call's facts
        self.keys: list = []
        self.values: list = []
        self.dtype = None
        self.capacity = (0, 0)  # rows, columns
        self.steps: dict[tuple[int, int], _Step] = {}
        self.pool = None
        self.num_captures = 0
        self.capture_error: Optional[str] = None
        self._compiled_logits = None
        self.num_compiles = 0  # graphs inductor compiled for this decoder
        self.compile_seconds = 0.0  # spent in the compiling calls (Dynamo's trace, inductor, the first run)
        self.compile_error: Optional[str] = None

    @property
    def compiled_logits(self):
        if self._compiled_logits is None:
            self._compiled_logits = _compiled_logits(self)
        return self._compiled_logits

    def compile_failed(self, error: Exception) -> None:
        """A compiled step failed: a forward Dynamo cannot trace whole (``fullgraph``), inductor
        cannot build (no C++ compiler on a CPU), a recompile after the warm-up, or Dynamo's
        recompile limit. Compiling stops for this decoder, with one warning; steps run eager."""
        if self.compile_error is None:
            self.compile_error = _where(error)
            warnings.warn(f"playpen: decoding without torch.compile, the model's step could not be "
                          f"compiled ({self.compile_error})", stacklevel=3)

    def release(self) -> None:
        self.keys, self.values, self.steps, self.capacity, self.pool = [], [], {}, (0, 0), None
        self.lora, self.merged_adapter = [], None

    def _merge(self, adapter: Optional[str]) -> bool:
        """Refresh the merged weights of ``adapter`` (None: each layer's active adapter;
        ``__base__``: none) from the current weights; False where the adapters cannot be
        merged (DoRA, several active adapters, LoRA on other than linear layers): the rows
        then take peft's own path. Captured steps read the buffers, so a refresh in place is
        all a new call needs."""
        import torch
        layers = lora_layers(self.model)
        if not layers:  # a plain model (or no peft): nothing to merge
            return False
        names = []
        for module in layers:
            name = mergeable_adapter(module, adapter)
            if name is None:
                return False
            names.append(name)
        if self.lora and (len(self.lora) != len(layers) or any(a is not b for (a, _, _), b in zip(self.lora, layers))):
            self.release()  # another set of layers: the captured steps read the old buffers
        if not self.lora:
            self.lora = [(m, n, torch.empty_like(base_weight(m))) for m, n in zip(layers, names)]
        elif [n for _, n, _ in self.lora] != names:
            self.lora = [(m, n, buffer) for (m, _, buffer), n in zip(self.lora, names)]
        with torch.no_grad():
            for module, name, buffer in self.lora:
                buffer.copy_(base_weight(module))
                if name != "__base__":
                    buffer.add_(delta_weight(module, name).to(buffer.dtype))
        self.merged_adapter = adapter
        return True

    def merged(self):
        """While active: the adapted layers' base weights are the merged buffers and their
        adapters are off (a no-op unless this call merges)."""
        from contextlib import contextmanager

        @contextmanager
        def swapped():
            if not self.merge:
                yield
                return
            saved = []
            try:
                for module, _, buffer in self.lora:
                    weight = base_weight(module)
                    saved.append((module, weight, weight.data, set_adapters_disabled(module, True)))
                    weight.data = buffer
                yield
            finally:
                for module, weight, data, disabled in saved:
                    weight.data = data
                    set_adapters_disabled(module, disabled)
        return swapped()

    def _ensure(self, rows: int, columns: int, reference: list) -> None:
        """Buffers of at least ``rows`` x ``columns``, shaped and typed like ``reference``
        (one row's per-layer (keys, values))."""
        import torch
        dtype = reference[0][0].dtype
        if rows <= self.capacity[0] and columns <= self.capacity[1] and dtype == self.dtype \
                and len(self.keys) == len(reference):
            return
        rows, columns = max(rows, self.capacity[0]), max(columns, self.capacity[1])
        self.release()
        for k, v in reference:
            self.keys.append(torch.zeros((rows, k.shape[0], columns, k.shape[-1]), dtype=dtype, device=self.device))
            self.values.append(torch.zeros((rows, v.shape[0], columns, v.shape[-1]), dtype=dtype, device=self.device))
        self.dtype, self.capacity = dtype, (rows, columns)
        if self.graphs:
            import torch.cuda
            self.pool = torch.cuda.graph_pool_handle()

    def _step(self, rows: int, columns: int, adapter: Optional[str], compiled: bool = False) -> _Step:
        compiled = compiled and self.compile_error is None
        key = (rows, columns, adapter, self.merge, compiled)
        step = self.steps.get(key)
        if step is None:
            step = self.steps[key] = _Step(self, rows, columns, adapter, compiled)
            if compiled:
                began = time.perf_counter()
                step.warm_up()  # compiles here, never inside a graph capture (a capture cannot compile)
                self.compile_seconds += time.perf_counter() - began
            if self.graphs:
                try:
                    step.capture(self.pool)
                    self.num_captures += 1
                except Exception as error:  # noqa: BLE001 - a model whose forward cannot be captured
                    # (a host sync or a data-dependent shape in its code): the same steps, uncaptured
                    self.capture_error = _where(error)
                    warnings.warn(f"playpen: decoding without CUDA graphs, the model's step could not be "
                                  f"captured ({self.capture_error})", stacklevel=2)
                    self.graphs = False
                    self.steps = {key: _Step(self, rows, columns, adapter, compiled)}
                    step = self.steps[key]
        return step

    def decode(self, model, tokenizer, prompts: list, logits, full: list, sampling, budgets: list,
               adapters: list, store, conversations, owners: list, facts: Optional[ModelFacts] = None) -> list:
        """:func:`playpen.inference.dynamic.decode`'s contract: ``logits`` are the prompts'
        last logits, ``full[r]`` row r's per-layer (keys, values) over its whole prompt;
        finished rows' caches go to ``store``; ``adapters``: the rows' peft adapter (one name
        for all); ``facts``: the call's :class:`~playpen.inference.model_facts.ModelFacts`
        (None: read here); returns one Generation per prompt."""
        import torch
        facts = facts if facts is not None else ModelFacts(model, tokenizer)
        eos = set(facts.eos)
        self.cache_key = facts.cache_key
        temperature = sampling.temperature if sampling.temperature and sampling.temperature > 0 else 1.0
        compiled = bool(getattr(sampling, "compile_decode", False))
        n = len(prompts)
        need = max(len(p) + b for p, b in zip(prompts, budgets))
        self._ensure(_bucket_rows(n), _bucket_columns(need), full[0])
        self.merge = self.merge_lora and self._merge(adapters[0])
        for slot, layers in enumerate(full):
            length = len(prompts[slot])
            for index, (k, v) in enumerate(layers):
                self.keys[index][slot, :, :length] = k
                self.values[index][slot, :, :length] = v
        del full
        slots = list(range(n))  # slot s holds row slots[s]
        positions = torch.tensor([len(p) for p in prompts], dtype=torch.long, device=self.device)
        tokens_of: list[list[int]] = [[] for _ in range(n)]
        logprobs_of: list[list[float]] = [[] for _ in range(n)]
        while True:
            chosen = choose_tokens(logits, sampling, check_finite=False)
            logprobs = token_logprobs(logits, chosen, temperature)
            # one host sync a step: the tokens, their logprobs and whether any logit was NaN
            both = torch.stack([chosen.to(logprobs.dtype), logprobs,
                                torch.isnan(logits).any(-1).to(logprobs.dtype)]).cpu()
            if bool(both[2].any()):
                check_finite_scores(logits)  # raises DivergedModelError
            keep = []
            for s, (token, logprob) in enumerate(zip(both[0].long().tolist(), both[1].tolist())):
                r = slots[s]
                tokens_of[r].append(token)
                logprobs_of[r].append(logprob)
                if token in eos or len(tokens_of[r]) >= budgets[r]:
                    covered = len(prompts[r]) + len(tokens_of[r]) - 1  # the last token was never fed
                    store.put(conversations[r], owners[r], prompts[r] + tokens_of[r][:-1],
                              [(k[s, :, :covered].clone(), v[s, :, :covered].clone())
                               for k, v in zip(self.keys, self.values)])
                else:
                    keep.append(s)
            if not keep:
                break
            if len(keep) < len(slots):  # the live rows move to the front slots
                index = torch.tensor(keep, dtype=torch.long, device=self.device)
                if keep != list(range(len(keep))):
                    for buffer in (*self.keys, *self.values):
                        buffer[:len(keep)] = buffer[index]
                slots = [slots[s] for s in keep]
                chosen, positions = chosen[index], positions[index]
            furthest = max(len(prompts[r]) + len(tokens_of[r]) for r in slots)  # the last position fed, + 1
            step = self._step(_bucket_rows(len(slots)), _bucket_columns(furthest), adapters[0], compiled)
            logits = step.run(chosen, positions).float()
            positions = positions + 1
        generations = []
        for r in range(n):
            ids = tokens_of[r]
            finished = ids[-1] in eos
            generations.append(Generation(
                token_ids=tuple(ids), logprobs=tuple(logprobs_of[r]),
                text=tokenizer.decode(ids[:-1] if finished else ids, skip_special_tokens=False), finished=finished))
        return generations


def _where(error: Exception) -> str:
    """An error in one line: its type, message and the last frames it passed."""
    frames = traceback.extract_tb(error.__traceback__)[-3:]
    message = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {message} (at " + " < ".join(
        f"{frame.filename.rsplit('/', 2)[-1]}:{frame.lineno}" for frame in reversed(frames)) + ")"


_DECODERS: "weakref.WeakKeyDictionary[Any, StaticDecoder]" = weakref.WeakKeyDictionary()


def static_decoder(model: Any, graphs: Optional[bool] = None, merge_lora: Optional[bool] = None) -> StaticDecoder:
    """The model's :class:`StaticDecoder` (one per model object, kept while it lives)."""
    decoder = _DECODERS.get(model)
    if decoder is None or (graphs is not None and decoder.graphs != bool(graphs)) \
            or (merge_lora is not None and decoder.merge_lora != bool(merge_lora)):
        decoder = _DECODERS[model] = StaticDecoder(model, graphs, merge_lora)
    return decoder


def release_static_decoders() -> None:
    """Free every model's decode buffers and captured steps."""
    for decoder in list(_DECODERS.values()):
        decoder.release()
