"""A trainer's end-of-run evaluation: the three numbers LM Playschool reports, before and after.

Most Playschool entries gained clemscore on the games they trained on while losing
out-of-domain clemscore or statscore, so the end of a run reports all three for the model it
holds (after) and for the model it started from (before): the base model (its adapters
switched off), or with ``--init-adapter`` that adapter as loaded from disk, so that a run
which ends below its start says so:

- the clemscore of the trained games on their held-out instances, ``--eval-max-instances`` per
  experiment (default 4: 20 of referencegame's 90 episodes; 0 = all), reported as the set
  ``trained_games``;
- the clemscore of each game set of the sets file named by ``--eval-sets`` (default
  ``out_of_domain``), ``--eval-set-instances`` instances per experiment (default 1: 18
  episodes for playpen's out-of-domain set);
- the statscore of the sets file's static tasks (lm-evaluation-harness, ``--eval-static-limit``
  questions per task), when lm-eval is installed (else a note, and no statscore).

Each side is a results folder of ``playpen eval``'s layout, and the table printed is
``playpen eval --compare BEFORE AFTER``'s (:func:`playpen.evaluation.compare.compare_runs`),
which says how many episodes or questions each number is over.
The numbers before depend only on the model (and start adapter) and the settings, so they are
kept in ``<results_dir>/<model>+base-<settings hash>/`` (``+start-`` with an init adapter) and reused by every later run with the same
model and settings (a changed setting: a new folder); ``--no-eval-before`` skips them.
Everything that can be checked (the sets file, the set names, the static tasks, earlier
results) is checked before training, by :meth:`FinalEvaluation.check`.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import time
from pathlib import Path
from typing import Any, Optional, Sequence

from playpen.envs.turns import max_turns
from playpen.errors import EvaluationError, GameLoadError
from playpen.evaluation import EVAL_FILE, check_no_earlier_results, evaluate, read_episode_scores, table_from_scores
from playpen.evaluation.compare import compare_runs
from playpen.evaluation.game_sets import load_game_sets, set_scores, sets_text, table_names
from playpen.evaluation.static_suite import STATIC_FILE, import_lm_eval, load_tasks, run_static
from playpen.files import write_json
from playpen.models import load_model_by_name
from playpen.training.common.config import split_list

TRAINED_SET = "trained_games"
BEFORE_FILE = "playpen-before.json"
"""In a base model's folder: the settings its numbers were measured with, written last."""


@contextlib.contextmanager
def adapters_off(model):
    """Every LoRA (peft tuner) layer of ``model`` switched off: the base model's forward pass.
    Works on a PeftModel and on a model whose layers a trainer injected in place (TRL's
    ``peft_config``); the layers that were on are switched on again after."""
    from peft.tuners.tuners_utils import BaseTunerLayer
    layers = [m for m in model.modules() if isinstance(m, BaseTunerLayer) and not m.disable_adapters]
    for layer in layers:
        layer.enable_adapters(False)
    try:
        yield
    finally:
        for layer in layers:
            layer.enable_adapters(True)


@contextlib.contextmanager
def greedy(players: Sequence):
    """Every player with generation arguments decodes greedily (temperature 0) meanwhile: the
    end-of-run numbers are one deterministic play of each instance, before and after alike,
    not one sample at the run's training temperature (-T 1.0 for GRPO)."""
    changed = []
    for player in players:
        args = getattr(player, "gen_args", None)
        if isinstance(args, dict) and args.get("temperature", 0.0) != 0.0 and hasattr(player, "set_gen_args"):
            changed.append((player, dict(args)))
            player.set_gen_args(**{**args, "temperature": 0.0})
    try:
        yield
    finally:
        for player, args in changed:
            player.set_gen_args(**args)


def adapter_stamp(folder: str) -> dict:
    """What identifies an adapter's weights for the cache: its folder and its weight files'
    sizes and modification times (retrained in place: measured again)."""
    files = sorted(Path(folder).glob("adapter_model.*"))
    return {"path": str(Path(folder).resolve()),
            "files": [[f.name, f.stat().st_size, f.stat().st_mtime_ns] for f in files]}


def has_adapters(model) -> bool:
    from peft.tuners.tuners_utils import BaseTunerLayer
    return any(isinstance(m, BaseTunerLayer) for m in model.modules())


class FinalEvaluation:
    """The end-of-run evaluation of a trainer whose config is a RunConfig (see the module
    docstring). ``after_name``: the results folder of the trained model."""

    def __init__(self, config, games: Sequence[str], after_name: str):
        self.cfg, self.games, self.after_name = config, list(games), after_name
        self.game_sets = None
        self.sets: dict[str, list[str]] = {}
        self.tasks: list[str] = []
        self.notes: list[str] = []

    # ------------------------------------------------------------------ before training

    def check(self) -> None:
        """Everything that can fail before training: the sets file and its sets, lm-eval and
        the static tasks, earlier results of another run in the trained model's folder."""
        cfg = self.cfg
        set_names = [] if cfg.eval_sets.strip().lower() == "none" else split_list(cfg.eval_sets)
        if set_names or cfg.eval_static:
            self.game_sets = load_game_sets(cfg.eval_sets_file or None)
        if set_names:
            self.sets = self.game_sets.resolve(set_names)
            if TRAINED_SET in self.sets:
                raise EvaluationError(f"--eval-sets: '{TRAINED_SET}' is the name of the trained games' set; "
                                      f"rename that set in {self.game_sets.path}")
        if cfg.eval_static:
            try:
                import_lm_eval()
            except EvaluationError as e:
                self.notes.append(f"no statscore at the end: {e} (or pass --no-eval-static)")
            else:
                self.tasks = list(self.game_sets.static_tasks)
                load_tasks(self.tasks)
        for note in self.notes:
            print(f"[playpen] {note}", flush=True)
        if not (cfg.resume or cfg.overwrite):
            hint = "pass --overwrite to replace them or --results-dir DIR to keep them"
            check_no_earlier_results(cfg.results_dir, self.after_name, self.games + self.set_games, hint=hint)
            if self.tasks and (Path(cfg.results_dir) / self.after_name / STATIC_FILE).exists():
                raise EvaluationError(f"{Path(cfg.results_dir) / self.after_name / STATIC_FILE} holds an earlier "
                                      f"static evaluation: {hint}")

    @property
    def set_games(self) -> list[str]:
        """The set games not among the trained games (those are played once, with their instances)."""
        trained = set(table_names({"t": self.games})["t"])
        games = [g for members in self.sets.values() for g in members]
        return [g for g in dict.fromkeys(games) if table_names({"g": [g]})["g"][0] not in trained]

    # ------------------------------------------------------------------ after training

    def run(self, players: Sequence, learner) -> dict:
        """Evaluate after (as the players are, decoding greedily) and before (the start adapter,
        the learner's adapters off, or the cached numbers of either); print the trained games' table and before -> after.
        Returns what ``playpen-run.json`` gets: ``eval`` (the trained games' table, after),
        ``eval_sets`` and ``static`` (after), ``before_after`` (the comparison), the notes."""
        with greedy(players):
            return self._run(players, learner)

    def _run(self, players: Sequence, learner) -> dict:
        cfg = self.cfg
        started = time.time()
        after = self._evaluate(players, learner, self.after_name, overwrite=cfg.resume or cfg.overwrite)
        seconds = {"after": round(time.time() - started, 1)}
        print(after["trained"].to_text(), flush=True)
        out: dict = {"eval": after["trained"].to_dict(),
                     "eval_sets": {n: s.to_dict() for n, s in after["sets"].items()}}
        if after["static"] is not None:
            out["static"] = after["static"].to_dict()
        if cfg.eval_before:
            started = time.time()
            before_dir, cached = self._before(players, learner)
            seconds["before"] = round(time.time() - started, 1)
            comparison = compare_runs(before_dir, after["run_dir"], out=after["run_dir"])
            what = "the start adapter (--init-adapter)" if getattr(cfg, "init_adapter", "") else "the base model"
            print(f"\nbefore ({what}) -> after" + " (before: cached by an earlier run)" * cached + "\n"
                  + comparison.to_text(), flush=True)
            out["before_after"] = {**comparison.to_dict(), "before_cached": cached}
        else:
            print("\n" + sets_text(after["sets"]), flush=True)
            if after["static"] is not None:
                print("\n" + after["static"].to_text(), flush=True)
        if self.notes:
            out["eval_notes"] = list(self.notes)
        out["eval_seconds"] = seconds
        print(f"[playpen] end-of-run evaluation: {', '.join(f'{k} {v:.0f} s' for k, v in seconds.items())}",
              flush=True)
        return out

    def settings(self, players: Sequence) -> dict:
        """What the base model's numbers depend on (the cache key)."""
        cfg = self.cfg
        return {"players": [{"name": getattr(p, "name", str(p)), "spec": _spec(p), "gen_args": getattr(p, "gen_args", {})}
                            for p in players],
                "games": self.games, "max_instances": cfg.eval_max_instances, "sets": self.sets,
                "set_instances": cfg.eval_set_instances, "static_tasks": self.tasks,
                "static_limit": cfg.eval_static_limit, "batch_size": cfg.eval_batch_size,
                "max_turns": max_turns()}

    def _before(self, players: Sequence, learner) -> tuple[Path, bool]:
        """(the folder of the model training started from, whether it was cached): the base
        model, or with ``--init-adapter`` that adapter, loaded from disk as it was given — a
        run that ends below its start shows it here."""
        settings = json.loads(json.dumps(self.settings(players), default=str))
        start = getattr(self.cfg, "init_adapter", "")
        if start:
            settings["start_adapter"] = adapter_stamp(start)
        key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:10]
        name = f"{getattr(learner, 'name', 'model')}+{'start' if start else 'base'}-{key}"
        folder = Path(self.cfg.results_dir) / name
        try:
            if json.loads((folder / BEFORE_FILE).read_text(encoding="utf-8")) == settings:
                return folder, True
        except (OSError, ValueError):
            pass
        shutil.rmtree(folder, ignore_errors=True)  # an earlier run stopped while measuring it
        model = learner.model
        if start:
            first = load_model_by_name(learner.name, gen_args=dict(learner.gen_args, temperature=0.0), adapter=start,
                                       run_name=f"{learner.name}+start")
            self._evaluate([first if p is learner else p for p in players], first, name, overwrite=True)
            del first
        elif has_adapters(model):
            with adapters_off(model):
                self._evaluate(players, learner, name, overwrite=True)
        else:  # a full fine-tune: the base model loaded again by name
            print(f"[playpen] before: {learner.name} has no adapter to switch off; loading it again by name",
                  flush=True)
            base = load_model_by_name(learner.name, gen_args=dict(learner.gen_args, temperature=0.0))
            self._evaluate([base if p is learner else p for p in players], base, name, overwrite=True)
            del base
        write_json(folder / BEFORE_FILE, settings, indent=1)
        return folder, False

    def _evaluate(self, players: Sequence, learner, run_name: str, overwrite: bool) -> dict:
        """The trained games, the set games and the static tasks into ``<results_dir>/<run_name>``
        (replaced when `overwrite`): ``{"trained": table, "run_dir", "sets": scores, "static": table}``."""
        cfg = self.cfg
        run_dir = Path(cfg.results_dir) / run_name
        if overwrite:  # the folder shows exactly what was measured now (a set dropped since included)
            shutil.rmtree(run_dir, ignore_errors=True)
        model = getattr(learner, "model", learner)
        model.eval()
        trained = evaluate(players, self.games, results_dir=cfg.results_dir, max_instances=cfg.eval_max_instances or None,
                           batch_size=cfg.eval_batch_size, run_name=run_name)
        if self.set_games:
            try:
                evaluate(players, self.set_games, results_dir=cfg.results_dir,
                         max_instances=cfg.eval_set_instances or None, batch_size=cfg.eval_batch_size,
                         run_name=run_name)
            except GameLoadError as e:  # the games that did play still count; the trained model is saved
                print(f"[playpen] {e}", flush=True)
        # the folder's table (trained and set games) with a clemscore per set, as `playpen eval` writes it
        data = json.loads((run_dir / EVAL_FILE).read_text(encoding="utf-8"))
        scores = set_scores(table_from_scores(run_name, read_episode_scores(run_dir)),
                            table_names({TRAINED_SET: self.games, **self.sets}))
        write_json(run_dir / EVAL_FILE, {**data, **data["run_folder"], "sets": {n: s.to_dict() for n, s in scores.items()}},
                   indent=1)
        static = None
        if self.tasks:
            static = run_static(model, learner.tokenizer, self.tasks, run_name=run_name, batch_size=cfg.eval_batch_size,
                                limit=cfg.eval_static_limit or None, out_dir=run_dir)
        return {"trained": trained, "run_dir": run_dir, "sets": scores, "static": static}


def _spec(player: Any) -> Optional[dict]:
    spec = getattr(player, "model_spec", None)
    return spec.to_dict() if hasattr(spec, "to_dict") else None

