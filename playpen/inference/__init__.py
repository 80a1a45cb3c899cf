"""Inference engines: :mod:`playpen.inference.static` decodes over pre-allocated KV caches
with captured CUDA graphs (the dynamic loop is :mod:`playpen.inference.kvcache`)."""
