"""Hierarchical GRPO: episodes that start episodes (proposer-solver), its trainer
(:mod:`~playpen.training.hierarchy.trainer`)."""
