"""What every trainer shares: :class:`~playpen.training.common.base.BasePlayPen` and parsing its
options (:mod:`~playpen.training.common.base`), the config dataclasses
(:mod:`~playpen.training.common.config`), the lifecycle of a run — lock, resume, Ctrl-C, logs, the
final evaluation (:mod:`~playpen.training.common.lifecycle`) — checkpoints
(:mod:`~playpen.training.common.checkpoints`), memory (:mod:`~playpen.training.common.memory`),
curves (:mod:`~playpen.training.common.plotting`) and the non-finite guard
(:mod:`~playpen.training.common.finite`)."""
