"""The whole report of one model: clemscore per game set, the games' table, the statscore.

:func:`evaluate_suite` is what ``playpen eval`` runs and what a trainer can call on the
model it holds (its learner, adapter attached): ``suite="clem"`` plays the games (all sets
of the sets file, or the games given), ``"static"`` runs the lm-eval tasks, ``"all"`` both.
Everything lands in one run folder (``<results_dir>/<run name>/``): clemcore's files and
``playpen-eval.json`` (with ``"sets"``) for the games, ``playpen-static.json`` for the static
tasks, so that :func:`playpen.evaluation.compare.compare_runs` finds both. Everything that
can be checked (the sets file, the games, lm-eval and its tasks, earlier results) is
checked before the first episode is played.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from playpen.clem import clemcore
from playpen.errors import EvaluationError, GameLoadError
from playpen.evaluation import EVAL_FILE, EvalTable, evaluate
from playpen.evaluation.game_sets import GameSets, SetScore, load_game_sets, set_scores, sets_text, table_names
from playpen.evaluation.static_suite import STATIC_FILE, StaticTable, load_tasks, run_static
from playpen.files import write_json

SUITES = ("clem", "static", "all")


@dataclass
class SuiteResult:
    """What one call measured; `table` None without games, `static` None without tasks."""

    run_dir: Path
    table: Optional[EvalTable] = None
    sets: dict[str, SetScore] = field(default_factory=dict)
    static: Optional[StaticTable] = None

    def to_dict(self) -> dict:
        out: dict = {"run_dir": str(self.run_dir)}
        if self.table is not None:
            out.update(clem=self.table.to_dict(), sets={n: s.to_dict() for n, s in self.sets.items()})
        if self.static is not None:
            out["static"] = self.static.to_dict()
        return out

    def to_text(self) -> str:
        parts = []
        if self.table is not None:
            parts.append(self.table.to_text())
        if self.sets:
            parts.append(sets_text(self.sets))
        if self.static is not None:
            parts.append(self.static.to_text())
        return "\n\n".join(parts)


def suite_games(game_sets: Optional[GameSets], set_names: Sequence[str] | None, games: Sequence[str] | None,
                cwd: Optional[Path] = None) -> tuple[list[str], dict[str, list[str]]]:
    """(games to play, set -> its games). Named sets, or every set when neither sets nor
    games are named; games named with ``-g`` are played too (reported per set only when
    they complete a set)."""
    sets = game_sets.resolve(set_names or None, cwd) if game_sets and (set_names or not games) else {}
    play = [g for members in sets.values() for g in members]
    play += list(games or [])
    return list(dict.fromkeys(play)), sets


def check_static_model(model) -> None:
    """The static suite scores log-likelihoods: it needs a local HF model and its tokenizer."""
    if getattr(model, "model", None) is None or getattr(model, "tokenizer", None) is None:
        raise EvaluationError(f"the static suite needs a huggingface_local model (lm-eval scores its "
                              f"log-likelihoods); '{getattr(model, 'name', model)}' is not one")


def check_no_earlier_static(run_dir: str | Path) -> None:
    """EvaluationError when the run folder holds a static evaluation already."""
    path = Path(run_dir) / STATIC_FILE
    if path.exists():
        raise EvaluationError(f"{path} holds an earlier static evaluation: pass --name NEW to keep it or "
                              f"--overwrite to replace it")


def evaluate_suite(player_models: Sequence, *, suite: str = "all", game_sets: Optional[GameSets] = None,
                   set_names: Sequence[str] | None = None, games: Sequence[str] | None = None,
                   tasks: Sequence[str] | None = None, include_paths: Sequence[str | Path] = (),
                   results_dir: str | Path = "results", run_name: Optional[str] = None,
                   instances: Optional[str] = None, batch_size: int = 8, max_instances: Optional[int] = None,
                   limit: Optional[int] = None, overwrite: bool = False, threads: Optional[int] = None,
                   extra: Optional[dict] = None, items=None) -> SuiteResult:
    """Evaluate `player_models` (loaded clemcore models; the first is the evaluated one) and
    write the run folder's files; see the module docstring. `game_sets` None: the sets file
    in use (:func:`~playpen.evaluation.game_sets.load_game_sets`); `tasks` default to its
    ``static_tasks``. `limit`: at most that many questions per static task. `items`: only these
    instances of the games (see :func:`playpen.evaluation.evaluate`; a split's, with ``--split``)."""
    if suite not in SUITES:
        raise EvaluationError(f"unknown suite '{suite}' (valid: {', '.join(SUITES)})")
    name = run_name or clemcore().backends.Model.to_identifier(list(player_models))
    run_dir = Path(results_dir) / name
    if game_sets is None and ((suite != "static" and not games) or (suite != "clem" and not tasks)):
        game_sets = load_game_sets()
    play, sets = suite_games(game_sets, set_names, games) if suite != "static" else ([], {})
    if suite != "static" and not play:
        raise EvaluationError("no games to evaluate (pass -g GAME or --set NAME)")
    static_tasks = list(tasks or (game_sets.static_tasks if game_sets else ())) if suite != "clem" else []
    if static_tasks:
        check_static_model(player_models[0])
        if not overwrite:
            check_no_earlier_static(run_dir)
        load_tasks(static_tasks, include_paths)  # a missing lm-eval or task: before any game is played
    result = SuiteResult(run_dir)
    if play:
        failure = None
        try:
            result.table = evaluate(player_models, play, results_dir=results_dir, instances=instances,
                                    batch_size=batch_size, max_instances=max_instances, run_name=run_name,
                                    extra=extra, overwrite=overwrite, threads=threads, items=items)
        except GameLoadError as e:  # the other games were played: their sets are still reported
            if getattr(e, "table", None) is None:
                raise
            failure, result.table = e, e.table
        result.run_dir = Path(result.table.run_dir)
        result.sets = set_scores(result.table, table_names(sets))
        if sets:
            _add_to_eval_file(Path(result.table.run_dir), {"sets": {n: s.to_dict() for n, s in result.sets.items()}})
        if failure is not None:
            failure.suite = result
            raise failure
    if static_tasks:
        model = player_models[0]
        result.static = run_static(model.model, model.tokenizer, static_tasks, run_name=name,
                                   include_paths=include_paths, batch_size=batch_size, limit=limit, out_dir=run_dir)
    return result


def _add_to_eval_file(run_dir: Path, values: dict) -> None:
    path = run_dir / EVAL_FILE
    data = json.loads(path.read_text(encoding="utf-8"))
    write_json(path, {**data, **values}, indent=1)
