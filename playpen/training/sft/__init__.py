"""Supervised fine-tuning: demonstrations and their tokenisation
(:mod:`~playpen.training.sft.demonstrations`), the supervised anchor other trainers mix in
(:mod:`~playpen.training.sft.anchor`) and the trainers (:mod:`~playpen.training.sft.trainer`).
"""
