"""Stage pipelines: the stages and their state (:mod:`~playpen.training.pipeline.stages`) and the
trainer (:mod:`~playpen.training.pipeline.trainer`).
"""
