"""Hierarchical GRPO: episodes that start episodes. Proposer-solver's levels, groups and rollout
(:mod:`~playpen.training.hierarchy.proposer_solver`), the store of half-solved problems
(:mod:`~playpen.training.hierarchy.instance_store`) and the trainer
(:mod:`~playpen.training.hierarchy.trainer`)."""
