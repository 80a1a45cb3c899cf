"""Writing rollouts as clemcore 3.x results, atomically.

Layout (what ``clem run`` writes, so ``clem score/eval/transcribe`` work unchanged)::

    <records_dir>/<run_name>/                 the results folder of one rollout call
        <model>[--<model2>]/run.json
        <model>/<game>/<experiment>/experiment.json
        <model>/<game>/<experiment>/instance_00003[_r1][_b0.1]/
            instance.json  interactions.json  player_1.requests.json
            episode.json (playpen: ids, branch, rewards)  completed.json | error.json

Every file is written to a temporary name and renamed. A whole episode folder is
first assembled in ``<records_dir>/.staging-<run_name>/`` (outside the results
folder, so clemcore never sees it) and renamed into place when complete: an
interrupted run leaves complete episodes only. A run folder is created exclusively:
a new run never writes into an old one.
"""
from __future__ import annotations

import json
import math
import os
import secrets
import shutil
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping, Optional

from playpen.errors import PlaypenError


class RecordsError(PlaypenError):
    """The records folder cannot be created (exists already, not writable)."""


def write_json_atomic(path: Path, data: Any) -> Path:
    """Write JSON to ``path`` via a temporary sibling and ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, ensure_ascii=False, default=_json_default)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _json_default(value: Any):
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (set, tuple)):
        return list(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def default_run_name() -> str:
    return f"rollout-{datetime.now().strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def episode_dir_name(game_id: int, repeat: int = 0, branch_path: tuple[int, ...] = ()) -> str:
    """``instance_00003`` for the first episode of an instance; suffixes for repeats and branches."""
    name = f"instance_{int(game_id):05d}"
    if repeat:
        name += f"_r{repeat}"
    if branch_path:
        name += "_b" + ".".join(str(i) for i in branch_path)
    return name


class RunWriter:
    """One rollout call's results folder."""

    def __init__(self, records_dir: str | Path, run_name: Optional[str] = None):
        self.records_dir = Path(records_dir).resolve()
        self.run_name = run_name or default_run_name()
        self.run_dir = self.records_dir / self.run_name
        self.records_dir.mkdir(parents=True, exist_ok=True)
        try:
            self.run_dir.mkdir()
        except FileExistsError as e:
            raise RecordsError(f"run folder {self.run_dir} exists already; runs are never reused: "
                               f"choose another run name") from e
        except OSError as e:
            raise RecordsError(f"cannot create run folder {self.run_dir}: {e.strerror}") from e
        self.staging_dir = self.records_dir / f".staging-{self.run_name}"
        self._runs: dict[str, dict] = {}  # model dir -> run.json data
        self._experiments: set[tuple[str, str, str]] = set()
        self.num_episodes = 0

    # ------------------------------------------------------------------ run.json
    def start_game(self, model_dir: str, game_name: str, game_path: str, model_infos: Mapping) -> None:
        from playpen.clem import clemcore
        data = self._runs.get(model_dir)
        if data is None:
            data = dict(clem_version=clemcore().get_version(), created=datetime.now().isoformat(),
                        player_models=dict(model_infos), games={}, playpen_run=self.run_name)
            self._runs[model_dir] = data
        data["games"].setdefault(game_name, dict(game_path=str(game_path),
                                                 benchmark_start=datetime.now().isoformat(),
                                                 num_instances=0))
        write_json_atomic(self.run_dir / model_dir / "run.json", data)

    def end_game(self, model_dir: str, game_name: str) -> None:
        data = self._runs.get(model_dir)
        if data is None or game_name not in data["games"]:
            return
        info = data["games"][game_name]
        end = datetime.now()
        start = datetime.fromisoformat(info["benchmark_start"])
        info.update(benchmark_end=end.isoformat(), duration=str(end - start),
                    duration_seconds=(end - start).total_seconds())
        write_json_atomic(self.run_dir / model_dir / "run.json", data)

    # ------------------------------------------------------------------ episodes
    def write_episode(self, *, model_dir: str, game_name: str, experiment: Mapping, game_instance: Mapping,
                      dir_name: str, model_infos: Mapping, interactions: Optional[Mapping],
                      requests: Mapping[str, Mapping], episode_meta: Mapping,
                      error: Optional[BaseException] = None) -> Path:
        """Write one finished (or failed) episode; returns its folder."""
        experiment_dir = self.run_dir / model_dir / game_name / experiment["name"]
        key = (model_dir, game_name, experiment["name"])
        if key not in self._experiments:
            config = {k: v for k, v in experiment.items() if k != "game_instances"}
            config.update(timestamp=datetime.now().isoformat(), game_name=game_name,
                          player_models=dict(model_infos))
            if not (experiment_dir / "experiment.json").exists():
                write_json_atomic(experiment_dir / "experiment.json", config)
            self._experiments.add(key)
        final = experiment_dir / dir_name
        if final.exists():
            raise RecordsError(f"episode folder {final} exists already (duplicate episode name)")
        stage = self.staging_dir / f"{model_dir}--{game_name}--{experiment['name']}--{dir_name}"
        shutil.rmtree(stage, ignore_errors=True)
        stage.mkdir(parents=True)
        write_json_atomic(stage / "instance.json", game_instance)
        if interactions is not None:
            write_json_atomic(stage / "interactions.json", interactions)
        for stem, data in requests.items():
            write_json_atomic(stage / f"{stem}.requests.json", data)
        write_json_atomic(stage / "episode.json", _finite(episode_meta))
        stamp = {"timestamp": datetime.now().isoformat()}
        if error is None:
            write_json_atomic(stage / "completed.json", stamp)
        else:
            write_json_atomic(stage / "error.json", dict(stamp, error=type(error).__name__, message=str(error)))
        final.parent.mkdir(parents=True, exist_ok=True)
        os.rename(stage, final)
        run = self._runs.get(model_dir)
        if run is not None and game_name in run["games"]:
            run["games"][game_name]["num_instances"] += 1
        self.num_episodes += 1
        return final

    def close(self) -> None:
        """Finish run.json files and remove the staging folder."""
        for model_dir, data in self._runs.items():
            for game_name in list(data["games"]):
                if "benchmark_end" not in data["games"][game_name]:
                    self.end_game(model_dir, game_name)
            write_json_atomic(self.run_dir / model_dir / "run.json", data)
        shutil.rmtree(self.staging_dir, ignore_errors=True)


def _finite(value: Any) -> Any:
    """NaN -> None so that episode.json is strict JSON."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
