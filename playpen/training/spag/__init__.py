"""SPAG (self-play of adversarial language games): its options, rewards, losses and data
(:mod:`~playpen.training.spag.objective`), the phases of a run
(:mod:`~playpen.training.spag.phases`) and the trainer (:mod:`~playpen.training.spag.trainer`).
"""
