"""Generation: one door answers a batch of prompts (token ids) with token-exact turns and
their logprobs, whichever engine computes them. Rollouts call it (:mod:`playpen.rollouts`), as
do trainers that generate outside a rollout (SPIN, self-rewarding, judges); it imports nothing
of theirs.

- :mod:`~playpen.inference.engine`: :func:`generate` and :func:`generate_within` (the door),
  and the table that chooses the engine (``SamplingConfig.engine`` and the model's facts);
- the engines, each one module behind :class:`~playpen.inference.types.Engine`:
  :mod:`~playpen.inference.dynamic` and :mod:`~playpen.inference.static`, playpen's engine over
  kept KV caches (a growing cache; pre-allocated buffers with captured CUDA graphs), both
  prefilled by :mod:`~playpen.inference.prefill`; :mod:`~playpen.inference.hf_generate`, the
  named fallback, transformers' ``model.generate``; :mod:`~playpen.inference.vllm_engine`,
  vLLM in this process or a server (``SamplingConfig(engine="vllm")``), with
  :mod:`~playpen.inference.vllm_weights` pushing the learner's changed base weights into it;
- :mod:`~playpen.inference.kvcache`: the conversations' kept caches and how rows are stacked;
- :mod:`~playpen.inference.prefixes`: the one planner of shared prompt prefixes (training
  runs its shared-prefix forwards with it too);
- :mod:`~playpen.inference.sampling`, :mod:`~playpen.inference.types`: choosing a token;
  :class:`SamplingConfig`, :class:`Generation` and the :class:`Engine` protocol;
- :mod:`~playpen.inference.model_facts`, :mod:`~playpen.inference.transformers_compat`: what
  a model says (EOS ids, device, context window, whether its cache can be kept), read once
  per call of the door (:class:`~playpen.inference.model_facts.ModelFacts`), and what a
  transformers release does;
- :mod:`~playpen.inference.mixed_lora`: one forward for rows of several LoRA adapters.

Importing this package loads no torch or transformers.
"""
from playpen.inference.engine import generate, generate_within
from playpen.inference.kvcache import KVCacheStore, PrefillCounts
from playpen.inference.model_facts import context_limit
from playpen.inference.prefixes import PrefixPlan, plan_prefixes
from playpen.inference.types import Generation, SamplingConfig

__all__ = ["generate", "generate_within", "KVCacheStore", "PrefillCounts", "context_limit", "PrefixPlan",
           "plan_prefixes", "Generation", "SamplingConfig"]
