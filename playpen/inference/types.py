"""The inference engine's typed values: how to sample a turn, the turn that came back, and
what every engine behind the door provides (:class:`Engine`).

:class:`SamplingConfig` is re-exported by :mod:`playpen.rollouts.types` (a rollout's learner
carries one), so ``from playpen.rollouts import SamplingConfig`` keeps working.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Protocol, Sequence, runtime_checkable


@dataclass(frozen=True)
class SamplingConfig:
    """How the learner (or an HF teacher) generates a turn.

    ``temperature`` 0 means greedy decoding. Logprobs are always those of
    ``log_softmax(logits / T)`` with ``T = temperature`` (1.0 when greedy), i.e. the
    sampling distribution before top-p/top-k truncation, as TRL recomputes them.
    """

    temperature: float = 0.0
    max_new_tokens: int = 300
    top_p: Optional[float] = None
    top_k: Optional[int] = None
    max_batch_size: int = 64
    """Most rows in one ``generate`` call; larger groups are split."""
    engine: str = "auto"
    """Who generates: playpen's engine, decoding turns over kept KV caches ``static``
    (pre-allocated buffers, each step a captured CUDA graph on a GPU:
    :mod:`playpen.inference.static`), ``dynamic`` (a growing per-call cache,
    :mod:`playpen.inference.dynamic`), or ``auto``: static on CUDA where the model allows it,
    dynamic elsewhere (on a CPU the launches it saves cost nothing); or ``vllm``: vLLM, in
    this process or at ``vllm_url`` (:mod:`playpen.inference.vllm_engine`; docs/engines.md)."""
    vllm_url: Optional[str] = None
    """With ``engine="vllm"``: the URL of a running ``vllm serve`` (``http://host:8000``)
    that answers instead of a vLLM engine in this process."""
    engine_dtype: str = "auto"
    """With ``engine="vllm"`` in this process: the dtype vLLM computes in. ``auto``: bfloat16
    for sampled turns (temperature > 0) where the hardware computes it natively (a CPU with
    AVX512-BF16 or AMX, a GPU that supports it), the learner's own dtype for greedy turns, so
    that evaluations stay comparable with fp32 engines; ``float32`` or ``bfloat16``: always
    (:func:`playpen.inference.vllm_engine.engine_dtype`; docs/engines.md)."""
    compile_decode: bool = False
    """Compile the static engine's decode step with ``torch.compile`` (inductor fuses the
    step's many small elementwise kernels) before it is captured or run; ignored where the
    dynamic loop decodes. Off by default until it is measured on a GPU (benchmarks/README.md,
    "Throughput at scale"); a step that cannot be compiled decodes eager, with one warning."""

    @classmethod
    def from_gen_args(cls, gen_args: Optional[Mapping[str, Any]], **overrides) -> "SamplingConfig":
        """From clemcore generation arguments (``temperature``, ``max_tokens``), the settings
        every model carries and ``-T``/``-L`` set, and the engine ``--engine``/``--vllm-url``
        chose (``engine``, ``vllm_url``); ``overrides`` win (e.g. a GRPO run's temperature)."""
        gen = dict(gen_args or {})
        values = dict(temperature=float(gen.get("temperature", cls.temperature)),
                      max_new_tokens=int(gen.get("max_tokens", cls.max_new_tokens)),
                      engine=gen.get("engine") or cls.engine, vllm_url=gen.get("vllm_url"),
                      engine_dtype=gen.get("engine_dtype") or cls.engine_dtype)
        values.update(overrides)
        return cls(**values)


@dataclass(frozen=True)
class Generation:
    """One generated turn."""

    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    text: str
    finished: bool  # ended with an EOS (False: cut at max_new_tokens)


@runtime_checkable
class Engine(Protocol):
    """What each engine module behind :func:`playpen.inference.engine.generate` provides
    (:mod:`~playpen.inference.static`, :mod:`~playpen.inference.dynamic`,
    :mod:`~playpen.inference.hf_generate`, :mod:`~playpen.inference.vllm_engine`): the door
    chooses one from its table and calls it the same way, so adding an engine is one module
    and one row of that table."""

    CHUNKED: bool
    """Whether the door hands it ``SamplingConfig.max_batch_size`` rows at a time (False:
    every row at once, for an engine that schedules its own batches)."""
    PER_ROW_BUDGETS: bool
    """Whether it takes ``budgets`` (each row its own most new tokens)."""

    def generate(self, model: Any, tokenizer: Any, prompts: Sequence[Sequence[int]], sampling: SamplingConfig,
                 facts: Any, *, adapter_names: Optional[Sequence[Optional[str]]], budgets: Optional[Sequence[int]],
                 counts: Any, cache: Any, conversations: Optional[Sequence[Any]],
                 share_prefix: bool) -> list[Generation]:
        """One :class:`Generation` per prompt (token ids in; token ids, their logprobs and
        whether the turn ended at its EOS out). ``facts``: the call's
        :class:`~playpen.inference.model_facts.ModelFacts`; ``adapter_names``: each row's peft
        adapter (None: the model as it is); ``counts``: the
        :class:`~playpen.inference.kvcache.PrefillCounts` that adds up prompt positions;
        ``cache``/``conversations``: the kept KV caches and each row's key in them (an engine
        that keeps none ignores them), ``share_prefix``: prefill a common prefix once where the
        engine decides that per call."""
