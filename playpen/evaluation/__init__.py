"""Evaluation: play the held-out instances, score them, and compute the clemscore table.

The three steps are clemcore's own (the runners and file savers of ``clem run``, the
game scorers of ``clem score``, the table arithmetic of ``clem eval``), called in-process
so that a model trained a moment ago can be evaluated without reloading it. The numbers
are therefore exactly the ones ``clem run``/``clem score``/``clem eval`` give.

Longer than 400 lines because playing, scoring and tabling share one results layout and its
selectors (games, experiments, the protocol's items) and are read together.

Results go to ``<results_dir>/<run_name>/<game>/<experiment>/instance_N/`` (clemcore's
layout). ``run_name`` is the model name, or ``<model>+<adapter tag>`` for an adapter, or
``<model>--<partner>`` with a partner: results of different models or adapters never
share a folder. Each run folder also gets ``results.csv``/``results.html`` (clem eval's
table over every scored episode of that folder, earlier calls' games included) and
``playpen-eval.json`` (this call's table, which instances file each game played, and the
whole folder's table). Earlier episodes of a game in the run folder are never replaced
silently: :func:`play` refuses unless ``overwrite=True``. A game that cannot be loaded or
set up leaves nothing behind and is reported in one line with the file holding the details.
"""
from __future__ import annotations

import contextlib
import json
import logging
import math
import shutil
import sys
import traceback
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

from playpen.clem import RunnerErrors, clemcore, clemgame, log_dir, playing_threads, preserved_logging, torch_threads
from playpen.envs.loading import load_benchmark
from playpen.envs.turns import TurnLimitedBenchmark
from playpen.errors import EvaluationError, GameLoadError
from playpen.files import write_json
from playpen.registry import game_specs
from playpen.remote import check_reachable

EVAL_FILE = "playpen-eval.json"



# ----------------------------------------------------------------------------- table

@dataclass(frozen=True)
class GameScore:
    """One row of the clemscore table. ``quality`` is NaN when no episode was played."""

    game: str
    num_episodes: int
    percent_played: float
    quality: float

    @property
    def clemscore(self) -> float:
        if math.isnan(self.quality):
            return 0.0
        return round(self.percent_played / 100 * self.quality, 2)


@dataclass(frozen=True)
class EvalTable:
    """The clemscore table of one run: per game and the unweighted average over games."""

    run_name: str
    games: tuple[GameScore, ...]
    overall: GameScore
    run_dir: Optional[str] = None
    instances: Mapping[str, str] = field(default_factory=dict)
    """The instances file stem each game played (``in/<stem>.json``), where known."""

    @property
    def clemscore(self) -> float:
        return self.overall.clemscore

    def to_dict(self) -> dict:
        def row(s: GameScore) -> dict:
            return {**asdict(s), "quality": None if math.isnan(s.quality) else s.quality,
                    "clemscore": s.clemscore}
        return {"run_name": self.run_name, "run_dir": self.run_dir, "clemscore": self.clemscore,
                "overall": row(self.overall), "games": [row(g) for g in self.games],
                "instances": dict(self.instances)}

    def to_text(self) -> str:
        # the first column as wide as the longest name: a long one never pushes its row's numbers
        width = max([24] + [len(s.game) for s in (*self.games, self.overall)])
        lines = [f"clemscore table for {self.run_name}",
                 f"{'game':<{width}} {'episodes':>8} {'% played':>9} {'quality':>8} {'clemscore':>9}"
                 + ("  instances" if self.instances else "")]

        def fmt(s: GameScore) -> str:
            quality = "n/a" if math.isnan(s.quality) else f"{s.quality:.2f}"
            played_on = f"  in/{self.instances[s.game]}.json" if s.game in self.instances else ""
            return (f"{s.game:<{width}} {s.num_episodes:>8} {s.percent_played:>9.2f} {quality:>8} "
                    f"{s.clemscore:>9.2f}{played_on}")
        lines += [fmt(g) for g in self.games]
        lines.append(fmt(self.overall))
        return "\n".join(lines)


def table_from_scores(run_name: str, episode_scores: Sequence[dict]) -> EvalTable:
    """clem eval's arithmetic over ``[{"game", "Aborted", "Main Score"}, ...]``.

    % played = 100 × mean(1 − Aborted) per game; quality = mean Main Score over played
    episodes; both averaged unweighted over games (a game without any played episode has
    no quality and drops out of the quality mean); clemscore = % played / 100 × quality.
    """
    by_game: dict[str, list[dict]] = {}
    for score in episode_scores:
        by_game.setdefault(score["game"], []).append(score)
    rows = []
    for game in sorted(by_game):
        episodes = by_game[game]
        played = [1 - float(e["Aborted"]) for e in episodes]
        qualities = [float(e["Main Score"]) for e in episodes
                     if e.get("Main Score") is not None and not math.isnan(float(e["Main Score"]))]
        rows.append(GameScore(game, len(episodes), round(100 * sum(played) / len(played), 2),
                              round(sum(qualities) / len(qualities), 2) if qualities else math.nan))
    if not rows:
        raise EvaluationError(f"no scored episodes for {run_name}")
    return EvalTable(run_name, tuple(rows), average_row(rows))


def average_row(rows: Sequence[GameScore], name: str = "all") -> GameScore:
    """clem eval's macro average over games: % played and quality each averaged unweighted
    (a game without a quality drops out of the quality mean), so the row's clemscore is
    mean % played / 100 × mean quality — not the mean of the games' clemscores."""
    qualities = [r.quality for r in rows if not math.isnan(r.quality)]
    return GameScore(name, sum(r.num_episodes for r in rows),
                     round(sum(r.percent_played for r in rows) / len(rows), 2),
                     round(sum(qualities) / len(qualities), 2) if qualities else math.nan)


def read_episode_scores(run_dir: Path) -> list[dict]:
    """``{"game", "experiment", "episode", "Aborted", "Main Score"}`` for every scores.json
    under a run folder (layout ``<run>/<game>/<experiment>/<episode>/scores.json``)."""
    out = []
    for path in sorted(Path(run_dir).rglob("scores.json")):
        game, experiment, episode = path.parts[-4:-1]
        try:
            episode_scores = json.loads(path.read_text(encoding="utf-8"))["episode scores"]
            episode_scores["Aborted"]
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
            # e.g. half-written by an interrupted `clem score`: it counts in the folder's table
            raise EvaluationError(f"{path}: not a scores file ({type(e).__name__}: {e}); score the run folder "
                                  f"again (`clem score -r {run_dir}`) or remove the episode folder") from e
        main = episode_scores.get("Main Score")
        out.append({"game": game, "experiment": experiment, "episode": episode,
                    "Aborted": episode_scores["Aborted"],
                    "Main Score": math.nan if main is None else main})
    return out


# ----------------------------------------------------------------------------- playing

def only_items(items: Iterable[str] | None):
    """A GameInstances filter keeping the instances whose ``<experiment>/<game_id>`` is in
    `items` (None: every instance): a fixed dev or test split of an instances file."""
    if items is None:
        return None
    wanted = set(items)
    return lambda row: f"{row['experiment']['name']}/{row['game_instance']['game_id']}" in wanted


def limit_per_experiment(max_instances: int | None):
    """A GameInstances filter keeping the first `max_instances` instances of each experiment."""
    if not max_instances:
        return None
    seen: dict[str, int] = {}

    def keep(row: dict) -> bool:
        name = row["experiment"]["name"]
        seen[name] = seen.get(name, 0) + 1
        return seen[name] <= max_instances
    return keep


@contextlib.contextmanager
def _quiet_stdout():
    """clemcore prints progress to stdout and logs each run step at INFO; keep playpen's
    stdout for the table and the console for warnings."""
    run_logger = logging.getLogger("clemcore.run")
    level = run_logger.level
    run_logger.setLevel(logging.WARNING)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        run_logger.setLevel(level)


def check_no_earlier_results(results_dir: str | Path, run_name: str, games: Iterable[str],
                             hint: str = "pass --name NEW to keep them or --overwrite to replace them") -> None:
    """EvaluationError when ``<results_dir>/<run_name>/<game>`` already holds episodes of
    one of `games` (a re-run would replace them)."""
    for game in games:
        folder = Path(results_dir) / run_name / game
        if folder.is_dir() and any(folder.iterdir()):
            raise EvaluationError(f"{folder} already holds episodes of an earlier evaluation: {hint}")


def play(specs: Sequence, player_models: Sequence, *, results_dir: str | Path,
         batch_size: int = 8, max_instances: int | None = None, run_name: str | None = None,
         overwrite: bool = False, items: Iterable[str] | None = None) -> Path:
    """Play every instance of every game in `specs` with `player_models` (one model plays
    all roles; two = learner and partner) into clemcore's results layout; returns the run folder.

    The same runners and file savers as ``clem run``. A game whose folder in the run
    folder already holds episodes is an EvaluationError (nothing is played) unless
    ``overwrite``, which removes those episodes first: a table shows exactly the
    instances played now. A game that fails to load or to play any episode raises
    :class:`GameLoadError` once the others are played (see :func:`play_games`).
    """
    run_dir, failures = play_games(specs, player_models, results_dir=results_dir, batch_size=batch_size,
                                   max_instances=max_instances, run_name=run_name, overwrite=overwrite,
                                   items=items)
    if failures:
        raise _joined(failures) from failures[0].__cause__
    return run_dir


def play_games(specs: Sequence, player_models: Sequence, *, results_dir: str | Path,
               batch_size: int = 8, max_instances: int | None = None, run_name: str | None = None,
               overwrite: bool = False, items: Iterable[str] | None = None) -> tuple[Path, list[GameLoadError]]:
    """:func:`play`, returning the games that failed instead of raising (`items`: only the
    instances ``<experiment>/<game_id>`` listed, see :func:`only_items`): a game whose code
    does not load, or none of whose episodes could be played (e.g. every setup failed),
    leaves nothing in the run folder (a re-run is not blocked) and becomes a
    :class:`GameLoadError` with the cause and the file holding the traceback."""
    cg = clemgame()
    Model = clemcore().backends.Model
    results_dir = Path(results_dir)
    plans = []
    for spec in specs:
        models = list(player_models)
        if spec.players == 1 or len(set(id(m) for m in models)) == 1:
            models = models[:1]
        plans.append((spec, models, run_name or Model.to_identifier(models)))
    if not overwrite:  # refuse before playing anything
        for spec, _, name in plans:
            check_no_earlier_results(results_dir, name, [spec.game_name])
    for model in {id(m): m for m in player_models}.values():  # a server down: fail now, write nothing
        check_reachable(model, f"model '{getattr(model, 'name', model)}'")
    failures: list[GameLoadError] = []
    run_dir = results_dir / (run_name or plans[0][2]) if plans else results_dir
    for spec, models, name in plans:
        folder = cg.ResultsFolder(results_dir, run_dir=name)
        run_dir = folder.to_run_dir_path()
        # overwrite (checked above otherwise): the table must show exactly the instances played now
        shutil.rmtree(run_dir / spec.game_name, ignore_errors=True)
        failure = _play_game(spec, models, folder, batch_size, max_instances, items)
        if failure is not None:
            failures.append(failure)
            shutil.rmtree(run_dir / spec.game_name, ignore_errors=True)
            if run_dir.is_dir() and {p.name for p in run_dir.iterdir()} <= {"run.json"}:
                shutil.rmtree(run_dir)
    return run_dir, failures


def _play_game(spec, models: list, folder, batch_size: int, max_instances: int | None,
               items: Iterable[str] | None = None) -> Optional[GameLoadError]:
    cg = clemgame()
    from clemcore.clemgame.callbacks.files import PlayerFileSaver
    from clemcore.clemgame.runners import dispatch
    infos = clemcore().backends.Model.to_infos(models)
    callbacks = cg.GameBenchmarkCallbackList([
        cg.InstanceFileSaver(folder), cg.ExperimentFileSaver(folder, player_model_infos=infos),
        cg.InteractionsFileSaver(folder, player_model_infos=infos),
        cg.RunFileSaver(folder, player_model_infos=infos), PlayerFileSaver(folder),
        cg.SignalFileSaver(folder)])
    details = log_dir() / f"eval-{spec.game_name}.error.txt"
    try:
        benchmark = load_benchmark(spec)
    except GameLoadError as e:
        return _failure(spec.game_name, str(e), details, traceback.format_exception(e.__cause__ or e))
    captured = RunnerErrors()
    with preserved_logging(), _quiet_stdout(), captured, benchmark:
        if isinstance(items, Mapping):  # each game its own items (a split file's entries)
            items = items.get(spec.game_name, ())
        instances = (cg.GameInstances.from_game_spec(spec).filter(only_items(items))
                     .filter(limit_per_experiment(max_instances)))
        try:
            dispatch.run(TurnLimitedBenchmark(benchmark), instances, models, callbacks=callbacks,
                         batch_size=batch_size)
        except Exception as e:  # e.g. "could not prepare any game sessions": the cause is below
            captured.records.append("".join(traceback.format_exception(e)))
    game_dir = folder.to_run_dir_path() / spec.game_name
    if next(game_dir.rglob("completed.json"), None) is not None or not captured.records:
        captured.replay()
        return None
    first = next(iter(sorted(game_dir.rglob("error.json"))), None)
    reason = "no episode could be played"
    if first is not None:
        error = json.loads(first.read_text(encoding="utf-8"))
        reason = " ".join(f"{error.get('error', 'Error')}: {error.get('message', '')}".split())
    elif captured.records[0].strip():  # the runner's first traceback ends with the exception itself
        reason = captured.records[0].strip().splitlines()[-1].removeprefix("playpen.errors.")
    return _failure(spec.game_name, f"game '{spec.game_name}' failed in every episode (in/{spec.instances}.json): "
                    f"{reason}", details, captured.records)


def _failure(game: str, message: str, details: Path, tracebacks: Sequence[str]) -> GameLoadError:
    details.parent.mkdir(parents=True, exist_ok=True)
    details.write_text(message + "\n\n" + "\n".join(tracebacks), encoding="utf-8")
    error = GameLoadError(f"{message} (details: {details})")
    error.game, error.details = game, details
    return error


def _joined(failures: Sequence[GameLoadError]) -> GameLoadError:
    """The first failure in full, the others by name and details file (one line)."""
    more = "".join(f"; game '{f.game}' failed too (details: {f.details})" for f in failures[1:])
    return GameLoadError(f"{failures[0]}{more}")


def score(specs: Sequence, run_dir: str | Path) -> None:
    """``clem score`` for one run folder; fails loudly when an episode could not be scored
    (clemcore itself only logs that)."""
    cg = clemgame()
    run_dir = Path(run_dir)
    for spec in specs:
        files = sorted((run_dir / spec.game_name).rglob("interactions.json"))
        if not files:
            continue
        with preserved_logging(), _quiet_stdout(), cg.GameBenchmark.load_from_spec(spec) as benchmark:
            for f in files:
                (f.parent / "scores.json").unlink(missing_ok=True)
            benchmark.compute_scores(files)
        unscored = [f.parent for f in files if not (f.parent / "scores.json").exists()]
        if unscored:
            raise EvaluationError(f"{spec.game_name}: {len(unscored)} of {len(files)} episodes could not "
                                  f"be scored (first: {unscored[0]}); see {log_dir() / 'clembench.log'}")


def write_table(table: EvalTable, run_dir: Path, extra: dict | None = None) -> EvalTable:
    """``results.csv``/``.html`` over EVERY scored episode in the run folder (clem eval's own
    table code; games of earlier calls included, as ``clem eval`` would count them) and
    ``playpen-eval.json``: this call's `table`, `extra`, and under ``"run_folder"`` the table
    of the whole folder, which is returned."""
    clemcore()
    import pandas as pd
    from clemcore import clemeval
    scores = read_episode_scores(run_dir)
    rows = []
    for s in scores:
        rows.append([s["game"], table.run_name, s["experiment"], s["episode"], "Aborted", s["Aborted"]])
        rows.append([s["game"], table.run_name, s["experiment"], s["episode"], "Played", 1 - s["Aborted"]])
        rows.append([s["game"], table.run_name, s["experiment"], s["episode"], "Main Score", s["Main Score"]])
    df = pd.DataFrame(rows, columns=["game", "model", "experiment", "episode", "metric", "value"])
    with _quiet_stdout():
        clemeval.save_clem_table(df, str(run_dir))
    try:  # the instances files that earlier calls played
        earlier = json.loads((run_dir / EVAL_FILE).read_text(encoding="utf-8"))["run_folder"]["instances"]
    except (OSError, ValueError, KeyError, TypeError):
        earlier = {}
    whole = table_from_scores(table.run_name, scores)
    instances = {**earlier, **table.instances}
    whole = replace(whole, run_dir=table.run_dir,
                    instances={s.game: instances[s.game] for s in whole.games if s.game in instances})
    payload = {**table.to_dict(), **(extra or {}), "run_folder": whole.to_dict()}
    write_json(run_dir / EVAL_FILE, payload, indent=1)
    return whole


def evaluate(player_models: Sequence, games: Iterable[str] | None = None, *,
             results_dir: str | Path = "results", instances: str | None = None,
             batch_size: int = 8, max_instances: int | None = None, run_name: str | None = None,
             extra: dict | None = None, overwrite: bool = False, threads: int | None = None,
             items: Iterable[str] | None = None) -> EvalTable:
    """Play, score and tabulate. `player_models` are loaded clemcore models (a learner being
    trained can be passed as is). ``instances`` is an instances file stem for every game
    (each must have it); None plays each game's own (``clemgame.json``'s ``instances``, the
    held-out set of playpen's games); the table names the file each game played. Returns the
    table of this call's games; files land in the run folder (see :func:`write_table`).
    Earlier episodes of a requested game in the run folder: EvaluationError unless
    ``overwrite`` (see :func:`play`). Games that fail to load or play: GameLoadError after the
    other games are scored and tabulated (the error carries that table as ``.table``).
    ``threads``: torch's CPU threads while playing; None picks them by backend
    (:func:`playpen.clem.playing_threads`: 1 for a local model on the CPU), 0 keeps torch's.
    ``items``: only these instances (``<experiment>/<game_id>``, e.g. a protocol's test split), or
    game -> its items (:func:`playpen.evaluation.splits.split_items`; a game it lacks plays none)."""
    specs = game_specs(list(games) if games else None, instances)
    if not specs:
        raise EvaluationError("no games to evaluate (pass -g GAME; see `playpen list games`)")
    with torch_threads(playing_threads(player_models) if threads is None else (threads or None)):
        run_dir, failures = play_games(specs, player_models, results_dir=results_dir, batch_size=batch_size,
                                       max_instances=max_instances, run_name=run_name, overwrite=overwrite,
                                       items=items)
    failed = {f.game for f in failures}
    played = [s for s in specs if s.game_name not in failed]
    if not played:
        raise _joined(failures) from failures[0].__cause__
    score(played, run_dir)
    names = {s.game_name for s in played}
    episode_scores = [s for s in read_episode_scores(run_dir) if s["game"] in names]
    table = table_from_scores(run_dir.name, episode_scores)
    table = replace(table, run_dir=str(run_dir), instances={s.game_name: s.instances for s in played})
    failed_info = {"failed_games": [str(f) for f in failures]} if failures else {}
    paths = {"game_paths": {s.game_name: str(s.game_path) for s in played}}
    write_table(table, run_dir, {**(extra or {}), **paths, **failed_info})
    if failures:
        error = _joined(failures)
        error.table = table
        raise error from failures[0].__cause__
    return table
