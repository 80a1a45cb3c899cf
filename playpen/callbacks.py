"""Callbacks: template methods with typed arguments.

A public ``on_*`` method does the bookkeeping and calls the overridable ``_on_*`` hook.
``on_train_step`` returning False asks the trainer to stop early.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Optional

from playpen.distributed import rank_file


@dataclass(frozen=True)
class EpisodeSummary:
    """What a finished episode tells the callbacks."""

    game: str
    experiment: str
    game_id: int
    outcome: str  # "success" | "failure" | "aborted"
    main_score: float
    rewards: dict = field(default_factory=dict)  # per role
    num_turns: int = 0
    path: Optional[str] = None


class BaseCallback:
    """Subclass and override the ``_on_*`` hooks you need."""

    def __init__(self):
        self.num_episodes = 0
        self.num_steps = 0

    def on_learn_start(self, trainer_name: str, total_steps: Optional[int] = None) -> None:
        self._on_learn_start(trainer_name, total_steps)

    def on_rollout_start(self, num_episodes: int) -> None:
        self._on_rollout_start(num_episodes)

    def on_episode_end(self, episode: EpisodeSummary) -> None:
        self.num_episodes += 1
        self._on_episode_end(episode)

    def on_rollout_end(self) -> None:
        self._on_rollout_end()

    def on_train_step(self, step: int, metrics: dict) -> bool:
        self.num_steps = step
        return self._on_train_step(step, metrics) is not False

    def on_learn_end(self) -> None:
        self._on_learn_end()

    # hooks ---------------------------------------------------------------
    def _on_learn_start(self, trainer_name: str, total_steps: Optional[int]) -> None:
        pass

    def _on_rollout_start(self, num_episodes: int) -> None:
        pass

    def _on_episode_end(self, episode: EpisodeSummary) -> None:
        pass

    def _on_rollout_end(self) -> None:
        pass

    def _on_train_step(self, step: int, metrics: dict) -> Optional[bool]:
        return True

    def _on_learn_end(self) -> None:
        pass


class CallbackList(BaseCallback):
    """Fans every event out to its callbacks, in order."""

    def __init__(self, callbacks: Iterable[BaseCallback] = ()):
        super().__init__()
        self.callbacks = list(callbacks)

    def append(self, callback: BaseCallback) -> None:
        self.callbacks.append(callback)

    def _on_learn_start(self, trainer_name, total_steps):
        for cb in self.callbacks:
            cb.on_learn_start(trainer_name, total_steps)

    def _on_rollout_start(self, num_episodes):
        for cb in self.callbacks:
            cb.on_rollout_start(num_episodes)

    def _on_episode_end(self, episode):
        for cb in self.callbacks:
            cb.on_episode_end(episode)

    def _on_rollout_end(self):
        for cb in self.callbacks:
            cb.on_rollout_end()

    def _on_train_step(self, step, metrics):
        results = [cb.on_train_step(step, metrics) for cb in self.callbacks]
        return all(results)

    def _on_learn_end(self):
        for cb in self.callbacks:
            cb.on_learn_end()


# what the training bar shows, when a step logs it (short labels: the bar is one line): the loss,
# the reward, the share of groups without reward signal (GRPO: a fraction; expert iteration: the %
# of instances whose samples won nothing), the aborted share, the episodes' mean turns, the KL to
# the reference (GRPO with --beta > 0 only) and whether the rollouts came from weights the last
# step changed (1) or from the same weights as before (0: nothing is being learned)
PROGRESS_METRICS = {"train/loss": "loss", "rollout/reward_mean": "reward", "grpo/dropped_groups": "no_signal",
                    "expert/no_win_groups": "no_win%", "rollout/aborted_rate": "aborted",
                    "rollout/turns_mean": "turns", "train/kl": "kl", "rollout/adapter_changed": "changed"}


class ProgressCallback(BaseCallback):
    """tqdm bars for rollouts (episodes) and training (steps), on stderr."""

    def __init__(self, disable: bool = False):
        super().__init__()
        self.disable = disable
        self._rollout_bar = None
        self._train_bar = None

    def _on_learn_start(self, trainer_name, total_steps):
        from tqdm.auto import tqdm
        self._train_bar = tqdm(total=total_steps, desc=f"{trainer_name} steps", unit="step",
                               disable=self.disable, position=0)

    def _on_rollout_start(self, num_episodes):
        from tqdm.auto import tqdm
        self._rollout_bar = tqdm(total=num_episodes, desc="episodes", unit="ep", leave=False,
                                 disable=self.disable, position=1)

    def _on_episode_end(self, episode):
        if self._rollout_bar is not None:
            self._rollout_bar.update(1)
            self._rollout_bar.set_postfix(last=episode.outcome, refresh=False)

    def _on_rollout_end(self):
        if self._rollout_bar is not None:
            self._rollout_bar.close()
            self._rollout_bar = None

    def _on_train_step(self, step, metrics):
        if self._train_bar is not None:
            self._train_bar.update(step - self._train_bar.n)
            # tqdm shows 3 significant digits: a KL of 3e-5 stays readable (rounding to places would show 0)
            shown = {name: metrics[key] for key, name in PROGRESS_METRICS.items()
                     if isinstance(metrics.get(key), (int, float))}
            if shown:
                self._train_bar.set_postfix(shown, refresh=False)
        return True

    def _on_learn_end(self):
        if self._train_bar is not None:
            self._train_bar.close()
            self._train_bar = None


class JsonlLogCallback(BaseCallback):
    """Appends every training step's metrics and every episode to a JSON-lines log. In a
    data-parallel run rank R > 0 writes its own lines (its episodes) to
    ``<stem>.rank<R>.jsonl`` beside it: no two processes append to one file."""

    def __init__(self, path: Path):
        super().__init__()
        self.path = rank_file(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def _write(self, record: dict) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, default=str) + "\n")

    def write_event(self, event: str, **fields) -> None:
        """Append one line ``{"event": event, "time": now, **fields}``: a trainer's own
        events beside the steps and episodes (e.g. ``judge_unparsed``)."""
        self._write({"event": event, "time": time.time(), **fields})

    def _on_episode_end(self, episode):
        self._write({"event": "episode", "time": time.time(), **asdict(episode)})

    def _on_train_step(self, step, metrics):
        self._write({"event": "train_step", "time": time.time(), "step": step, **metrics})
        return True
