"""A population run's checkpoints: one per epoch, what ``--resume`` continues from.

``checkpoint-E`` (E epochs done) holds the optimizer states of epoch E-1's entrants
(``optimizers/<player>.pt``: a copy of one of them in epoch E continues its AdamW moments)
and ``trainer_state.json``, written last, naming the players of the population then. The
players' adapters are not copied into it: ``population/`` is written before it and only
ever grows (a saved adapter is never rewritten), so the checkpoint's list of names picks the
population of that moment out of it. Ratings and match results are not stored twice either:
a resumed run replays ``matches.jsonl`` up to the checkpoint, which gives the same Elo and
OpenSkill ratings, the same history and the same win rates for matchmaking.

An epoch stopped before its end (a signal, a crash) leaves no checkpoint; ``--resume``
removes what it wrote (its matches, metrics, records and adapters) and plays it again from
its start, with the same seeds.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from playpen.files import write_text
from playpen.population.players import POPULATION_FILE, Population, PopulationError
from playpen.training.common import lifecycle
from playpen.training.common.checkpoints import read_state, remove_checkpoint, rotate_checkpoints, write_state

OPTIMIZERS = "optimizers"
RUN_FILES = ("matches.jsonl", "metrics.jsonl", "ratings.json", "ratings.png")


def save(trainer: Any, done: int, states: dict[str, dict]) -> Path:
    """``checkpoint-<done>`` with the optimizer `states` of the epoch's entrants; older
    checkpoints beyond ``--save-total-limit`` go once it is complete."""
    import torch
    folder = trainer.run_dir / f"checkpoint-{done}"
    if folder.exists():
        remove_checkpoint(folder)
    (folder / OPTIMIZERS).mkdir(parents=True)
    for name, state in states.items():
        torch.save(state, folder / OPTIMIZERS / f"{name}.pt")
    write_state(folder, {"global_step": done, "players": trainer.population.names(), "entrants": list(states)})
    rotate_checkpoints(trainer.run_dir, trainer.config.save_total_limit)
    return folder


def start_over(run_dir: Path, overwrite: bool) -> None:
    """A run from epoch 0: an earlier run's files go (with ``--overwrite``; a population
    without a checkpoint is refused without it: it would be lost)."""
    if (run_dir / "population" / POPULATION_FILE).exists() and not overwrite:
        raise PopulationError(f"{run_dir} holds a population (population/) but no checkpoint to resume from: pass "
                              f"--overwrite to start over (its files are replaced), or --models-dir DIR")
    for name in RUN_FILES:
        (run_dir / name).unlink(missing_ok=True)
    for folder in ("population", "records"):
        shutil.rmtree(run_dir / folder, ignore_errors=True)


def restore(trainer: Any, folder: Path) -> tuple[int, dict[str, dict]]:
    """The run as `folder` left it: the population, ratings, results and metrics of its
    epochs (later lines and files go). Returns the epochs done and the optimizer states."""
    import torch
    state = read_state(folder)
    done, players, run_dir = int(state["global_step"]), list(state["players"]), trainer.run_dir
    population_dir = run_dir / "population"
    adapters = population_dir / "adapters"
    for extra in (adapters.iterdir() if adapters.is_dir() else []):
        if extra.is_dir() and extra.name not in players:  # saved by an epoch that did not finish: trained again
            shutil.rmtree(extra)
    model, tokenizer = lifecycle.model_of(trainer.learner), lifecycle.tokenizer_of(trainer.learner)
    base = getattr(getattr(model, "config", None), "_name_or_path", "") or ""
    trainer.population = Population.load(population_dir, model, tokenizer, base, trainer.config.lora_config(),
                                         names=players)
    trainer.replay(_kept_lines(run_dir / "matches.jsonl", done), done)
    trainer.metrics = _kept_lines(run_dir / "metrics.jsonl", done)
    for records in (run_dir / "records").glob("epoch-*"):
        if int(records.name.split("-")[1]) >= done:
            shutil.rmtree(records)
    states = {name: torch.load(folder / OPTIMIZERS / f"{name}.pt", map_location="cpu") for name in state["entrants"]}
    print(f"[playpen] --resume: after epoch {done - 1} ({folder.name}): {len(players)} players; the optimizer "
          f"states of {', '.join(states) or 'no player'} go on", flush=True)
    return done, states


def _kept_lines(path: Path, done: int) -> list[dict]:
    """The lines of a JSON-lines file of the first `done` epochs; the file keeps only them."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    kept = []
    for line in lines:
        try:
            if json.loads(line)["epoch"] < done:
                kept.append(json.loads(line))
        except (ValueError, KeyError, TypeError):  # a line cut short by a kill
            continue
    if len(kept) != len(lines):
        write_text(path, "".join(json.dumps(x) + "\n" for x in kept))
    return kept
