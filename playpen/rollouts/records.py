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

import os
import secrets
import shutil
from datetime import datetime
from pathlib import Path
from typing import Mapping, Optional

from playpen.clem import clemcore
from playpen.distributed import rank_suffix
from playpen.errors import RecordsError
from playpen.files import finite, write_json


def default_run_name() -> str:
    """``rollout-<time>-<id>``; ``...-rank<R>`` in a data-parallel run: every rank plays its own
    share of the episodes into run folders of its own."""
    return f"rollout-{datetime.now().strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}{rank_suffix()}"


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
    def start_game(self, model_dir: str, game_name: str, game_path: str, model_infos: Mapping,
                   instances: Optional[str] = None) -> None:
        """Record in ``run.json`` that this run plays `game_name` (from `game_path`, on
        ``in/<instances>.json``)."""
        data = self._runs.get(model_dir)
        if data is None:
            data = dict(clem_version=clemcore().get_version(), created=datetime.now().isoformat(),
                        player_models=dict(model_infos), games={}, playpen_run=self.run_name)
            self._runs[model_dir] = data
        data["games"].setdefault(game_name, dict(game_path=str(game_path), instances=instances,
                                                 benchmark_start=datetime.now().isoformat(),
                                                 num_instances=0))
        write_json(self.run_dir / model_dir / "run.json", data, sync=True)

    def end_game(self, model_dir: str, game_name: str) -> None:
        data = self._runs.get(model_dir)
        if data is None or game_name not in data["games"]:
            return
        info = data["games"][game_name]
        end = datetime.now()
        start = datetime.fromisoformat(info["benchmark_start"])
        info.update(benchmark_end=end.isoformat(), duration=str(end - start),
                    duration_seconds=(end - start).total_seconds())
        write_json(self.run_dir / model_dir / "run.json", data, sync=True)

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
                write_json(experiment_dir / "experiment.json", config, sync=True)
            self._experiments.add(key)
        final = experiment_dir / dir_name
        if final.exists():
            raise RecordsError(f"episode folder {final} exists already (duplicate episode name)")
        stage = self.staging_dir / f"{model_dir}--{game_name}--{experiment['name']}--{dir_name}"
        shutil.rmtree(stage, ignore_errors=True)
        stage.mkdir(parents=True)
        write_json(stage / "instance.json", game_instance, sync=True)
        if interactions is not None:
            write_json(stage / "interactions.json", interactions, sync=True)
        for stem, data in requests.items():
            write_json(stage / f"{stem}.requests.json", data, sync=True)
        write_json(stage / "episode.json", finite(episode_meta), sync=True)
        stamp = {"timestamp": datetime.now().isoformat()}
        if error is None:
            write_json(stage / "completed.json", stamp, sync=True)
        else:
            write_json(stage / "error.json", dict(stamp, error=type(error).__name__, message=str(error)), sync=True)
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
            write_json(self.run_dir / model_dir / "run.json", data, sync=True)
        shutil.rmtree(self.staging_dir, ignore_errors=True)
