"""Generation: one engine answers a batch of prompts (token ids) with token-exact turns and
their logprobs. Rollouts call it (:mod:`playpen.rollouts`), as do trainers that generate
outside a rollout (SPIN, self-rewarding, judges); it imports nothing of theirs.

- :mod:`~playpen.inference.engine`: :func:`generate` and :func:`generate_within` (the door),
  prefill and decode over kept KV caches, the static/dynamic choice;
- :mod:`~playpen.inference.kvcache`: the conversations' kept caches and how rows are stacked;
- :mod:`~playpen.inference.prefill`, :mod:`~playpen.inference.dynamic`,
  :mod:`~playpen.inference.static`: the prefill, and the two decode loops (a growing cache;
  pre-allocated buffers with captured CUDA graphs);
- :mod:`~playpen.inference.prefixes`: the one planner of shared prompt prefixes (training
  runs its shared-prefix forwards with it too);
- :mod:`~playpen.inference.sampling`, :mod:`~playpen.inference.types`: choosing a token;
  :class:`SamplingConfig` and :class:`Generation`;
- :mod:`~playpen.inference.model_facts`, :mod:`~playpen.inference.transformers_compat`: what
  a model says (EOS ids, device, context window) and what a transformers release does;
- :mod:`~playpen.inference.mixed_lora`: one forward for rows of several LoRA adapters;
- :mod:`~playpen.inference.hf_generate`: the named fallback, transformers' ``model.generate``;
- :mod:`~playpen.inference.vllm_engine`, :mod:`~playpen.inference.vllm_weights`: vLLM behind
  the same door (``SamplingConfig(engine="vllm")``), in this process or a server, and the
  learner's changed base weights pushed into it.

Importing this package loads no torch or transformers.
"""
from playpen.inference.engine import generate, generate_within
from playpen.inference.kvcache import KVCacheStore, PrefillCounts
from playpen.inference.model_facts import context_limit
from playpen.inference.prefixes import PrefixPlan, plan_prefixes
from playpen.inference.types import Generation, SamplingConfig

__all__ = ["generate", "generate_within", "KVCacheStore", "PrefillCounts", "context_limit", "PrefixPlan",
           "plan_prefixes", "Generation", "SamplingConfig"]
