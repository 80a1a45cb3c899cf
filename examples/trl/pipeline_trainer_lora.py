"""The packaged trainer `pipeline` (stages of the trainers above, each from the previous stage's
adapter) as a file: `playpen run examples/trl/pipeline_trainer_lora.py -l MODEL` is `playpen run
pipeline -l MODEL`.

Its documentation (what it trains, example commands, outputs) is the docstring of
PipelineTrainer in playpen/training/pipeline/trainer.py; `playpen run pipeline --help` shows it
with the options. A trainer file of your own imports (or subclasses) it as this one does.
"""

from playpen.training.pipeline.trainer import PipelineTrainer  # noqa: F401  (the trainer `playpen run` finds in this file)
