"""What every trainer shares: :class:`~playpen.training.common.base.BasePlayPen` and parsing its
options (:mod:`~playpen.training.common.base`), the config dataclasses
(:mod:`~playpen.training.common.config`), the lifecycle of a run — lock, resume, Ctrl-C, logs, the
final evaluation (:mod:`~playpen.training.common.lifecycle`) — the bridge from TRL's trainers
(:mod:`~playpen.training.common.trainer_callback`), the optimizer step and the policy-gradient
loss of the trainers with a loop of their own (:mod:`~playpen.training.common.optimization`,
:mod:`~playpen.training.common.losses`), checkpoints
(:mod:`~playpen.training.common.checkpoints`), memory (:mod:`~playpen.training.common.memory`),
curves (:mod:`~playpen.training.common.plotting`) and the non-finite guard
(:mod:`~playpen.training.common.finite`)."""
