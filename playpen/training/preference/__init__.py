"""Preference training, rounds of DPO with LoRA: the rounds and TRL's DPO trainer
(:mod:`~playpen.training.preference.rounds`), the pair sources of DPO
(:mod:`~playpen.training.preference.pair_sources`), SPIN (:mod:`~playpen.training.preference.spin`),
self-rewarding (:mod:`~playpen.training.preference.self_rewarding`) and the trainers
(:mod:`~playpen.training.preference.trainer`).
"""
