"""Self-evolving instances: a weighted store of what episodes produced, sampled as the
instances of later episodes (a curriculum that grows with the learner).

An item is a game instance (a JSON object, e.g. ``{"problem": "3 + 4 * 5"}``) with a
weight > 0; adding an instance that is already stored keeps the higher weight and counts
the sighting. Beyond ``capacity`` the lightest items leave (ties: the oldest first).
:meth:`InstanceStore.sample` draws items with probability proportional to their weight,
from a ``random.Random`` the caller seeds (e.g. per training step), so a resumed run draws
what the uninterrupted one would have.

The store is saved with the run (:meth:`InstanceStore.save`: one JSON file, written
atomically through :mod:`playpen.files`) and read back with :meth:`InstanceStore.load`; a
file that is not a store is a :class:`~playpen.errors.TrainingSetupError` naming it.
"""
from __future__ import annotations

import json
import math
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Union

from playpen.errors import TrainingSetupError
from playpen.files import write_json

FORMAT = "playpen-instance-store"
VERSION = 1


@dataclass
class StoredInstance:
    instance: dict
    weight: float
    added_step: int = 0
    seen: int = 1
    meta: dict = field(default_factory=dict)


class InstanceStore:
    """A weighted, bounded, resumable set of instances."""

    def __init__(self, capacity: int = 1000):
        if capacity < 1:
            raise ValueError(f"store capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.items: dict[str, StoredInstance] = {}
        self.num_added = 0

    def __len__(self) -> int:
        return len(self.items)

    @staticmethod
    def key(instance: Mapping[str, Any]) -> str:
        return json.dumps(instance, sort_keys=True)

    def add(self, instance: Mapping[str, Any], weight: float, *, step: int = 0,
            meta: Optional[Mapping[str, Any]] = None) -> bool:
        """Keep ``instance`` with ``weight`` (> 0, finite); False when it is not kept (a
        weight of 0, or lighter than every item of a full store)."""
        weight = float(weight)
        if math.isnan(weight) or math.isinf(weight) or weight < 0:
            raise ValueError(f"a stored instance needs a finite weight >= 0, got {weight}")
        if weight == 0:
            return False
        key = self.key(instance)
        old = self.items.get(key)
        if old is not None:
            old.weight, old.seen = max(old.weight, weight), old.seen + 1
            return True
        if len(self.items) >= self.capacity:
            lightest = min(self.items, key=lambda k: (self.items[k].weight, self.items[k].added_step))
            if self.items[lightest].weight >= weight:
                return False
            del self.items[lightest]
        self.items[key] = StoredInstance(dict(instance), weight, step, 1, dict(meta or {}))
        self.num_added += 1
        return True

    def sample(self, rng: random.Random, k: int = 1) -> list[dict]:
        """``k`` instances drawn with replacement, by weight (in a fixed item order, so the
        same ``rng`` state gives the same draw); [] when the store is empty."""
        if not self.items:
            return []
        keys = sorted(self.items)
        weights = [self.items[key].weight for key in keys]
        return [dict(self.items[key].instance) for key in rng.choices(keys, weights=weights, k=k)]

    def as_json(self) -> dict:
        return {"format": FORMAT, "version": VERSION, "capacity": self.capacity, "num_added": self.num_added,
                "items": [asdict(item) for _, item in sorted(self.items.items())]}

    def save(self, path: Union[str, Path]) -> Path:
        """Write the store to ``path`` atomically (a temporary sibling, then renamed)."""
        return write_json(path, self.as_json(), sync=True)

    @classmethod
    def load(cls, path: Union[str, Path], capacity: Optional[int] = None) -> "InstanceStore":
        """The store saved at ``path`` (``capacity`` None: the saved one)."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as e:
            raise TrainingSetupError(f"instance store {path} does not exist") from e
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise TrainingSetupError(f"instance store {path} is not readable JSON: {e}") from e
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise TrainingSetupError(f"{path} is not a playpen instance store (no \"format\": \"{FORMAT}\")")
        store = cls(int(capacity or data.get("capacity", 1000)))
        try:
            for item in data["items"]:
                stored = StoredInstance(**item)
                store.items[cls.key(stored.instance)] = stored
            store.num_added = int(data.get("num_added", len(store.items)))
        except (KeyError, TypeError, ValueError) as e:
            raise TrainingSetupError(f"instance store {path}: malformed item ({e})") from e
        while len(store.items) > store.capacity:
            lightest = min(store.items, key=lambda k: (store.items[k].weight, store.items[k].added_step))
            del store.items[lightest]
        return store
