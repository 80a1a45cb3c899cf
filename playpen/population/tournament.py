"""Round-robin tournaments between players (``playpen tournament``).

A player spec is a registered model name (``smol-135m``, ``programmatic``, a remote model)
or ``MODEL+ADAPTER`` (a peft adapter folder on that model). Every pair of players meets in
both seatings on the same held-out instances; the players on one local model are adapters
of ONE copy of it (its bare base included, as ``"__base__"`` rows), answered in one
generate per step. Every episode is written in clemcore's layout into one results folder
(``clem score -r``/``clem eval -r`` work on it); the ratings are Elo with bootstrap
intervals (Bradley–Terry, the order-free fit of a finished round robin, and Elo), OpenSkill,
wins/draws/losses: ``ratings.md`` (the table), ``ratings.json``,
``ratings.png`` and ``matches.jsonl``.
"""
from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Optional, Sequence

from playpen.errors import UnknownModelError
from playpen.files import write_json, write_text
from playpen.models import adapter_tag, check_adapter, check_model_name, load_model_by_name
from playpen.population.players import BASE, Population, PopulationError
from playpen.population.matches import game_seats, play_seating
from playpen.ratings import Match, OpenSkill, bootstrap_bradley_terry, bootstrap_elo, ratings_table
from playpen.registry import resolve_model
from playpen.rollouts.partners import as_partner
from playpen.rollouts.types import Learner, SamplingConfig
from playpen.training.common.lifecycle import tokenizer_of


@dataclass(frozen=True)
class PlayerRef:
    """A tournament player: its display name, the registered model and an optional adapter folder."""

    name: str
    model: str
    adapter: Optional[str] = None


@dataclass(frozen=True)
class TournamentResult:
    out_dir: Path
    players: tuple[str, ...]
    matches: tuple  # playpen.ratings.Match
    ratings: dict  # name -> (rating, low, high)
    table: str


def parse_player(spec: str) -> PlayerRef:
    """``MODEL`` or ``MODEL+ADAPTER``: the longest registered model name before a ``+``
    (model names may hold ``+``); the adapter must be a peft folder trained on that model's
    base (one line otherwise). Nothing is loaded."""
    spec = spec.strip()
    if not spec:
        raise PopulationError("an empty player spec: give MODEL or MODEL+ADAPTER_FOLDER")
    cuts = [i for i, c in enumerate(spec) if c == "+"]
    for cut in sorted(cuts, reverse=True):
        model, adapter = spec[:cut], spec[cut + 1:]
        try:
            entry = check_model_name(model)
        except UnknownModelError:
            continue
        if not adapter:
            raise PopulationError(f"player '{spec}': nothing after '+' (give MODEL+ADAPTER_FOLDER)")
        if entry.backend != "huggingface_local":
            raise PopulationError(f"player '{spec}': an adapter needs a huggingface_local model; '{model}' uses "
                                  f"backend '{entry.backend}'")
        base = str(entry.spec.get("huggingface_id", "")) or None
        check_adapter(adapter, base)
        return PlayerRef(f"{model}+{adapter_tag(adapter, model)}", model, adapter)
    check_model_name(spec)  # unknown: one line with close matches
    return PlayerRef(spec, spec)


def check_tournament(specs: Sequence[str], game: str, instances: Optional[str]) -> tuple[list[PlayerRef], list, list]:
    """The players, the game's seats and its instance rows; PopulationError (one line,
    exit 2) for fewer than two players, a player named twice or a game without two seats."""
    players = [parse_player(s) for s in specs]
    if len(players) < 2:
        raise PopulationError(f"a tournament needs at least two players (-m A -m B ...); got "
                              f"{len(players)}{': ' + players[0].name if players else ''}")
    names = [p.name for p in players]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise PopulationError(f"player '{twice[0]}' is named twice: every player plays every other once per seating")
    seats, rows = game_seats(game, instances)
    return players, seats, rows


def pick_instances(rows: list, num_instances: Optional[int], seed: int) -> list:
    """``num_instances`` rows (all when None), spread over the experiments by a seeded draw."""
    if num_instances is None or num_instances >= len(rows):
        return list(rows)
    return sorted(random.Random(seed).sample(rows, num_instances),
                  key=lambda r: (r["experiment"]["name"], int(r["game_instance"]["game_id"])))


def load_players(players: Sequence[PlayerRef], sampling: Any) -> tuple[dict[str, Any], list]:
    """Partner objects by player name: the players of one local model share ONE loaded copy
    (adapters by per-row names; its bare base as ``"__base__"`` when it carries adapters);
    other backends as the rollout engine loads them. Also returns the populations made."""
    gen_args = dict(temperature=sampling.temperature, max_tokens=sampling.max_new_tokens)
    partners: dict[str, Any] = {}
    populations = []
    by_model: dict[str, list[PlayerRef]] = {}
    for p in players:
        by_model.setdefault(p.model, []).append(p)
    for model_name, group in by_model.items():
        entry = resolve_model(model_name)
        if entry.backend != "huggingface_local":
            partner = as_partner(model_name, sampling=sampling)
            for p in group:
                partners[p.name] = partner
            continue
        clem_model = load_model_by_name(model_name, gen_args=gen_args, role="model")
        kwargs = dict(getattr(clem_model, "chat_template_kwargs", {}) or {})
        if not any(p.adapter for p in group):
            for p in group:
                partners[p.name] = Learner(clem_model.model, clem_model.tokenizer, p.name, sampling, kwargs)
            continue
        population = Population(clem_model.model, tokenizer_of(clem_model), str(entry.spec.get("huggingface_id", "")))
        for i, p in enumerate(group):
            if p.adapter:
                population.add_adapter(f"player{i}", {"tournament": p.name}, path=p.adapter, frozen=True)
        population.model.eval()
        for i, p in enumerate(group):
            adapter = f"player{i}" if p.adapter else BASE
            partners[p.name] = Learner(population.model, population.tokenizer, p.name, sampling, kwargs, adapter)
        populations.append(population)
    return partners, populations


def run_tournament(specs: Sequence[str], game: str, *, out_dir: Path, num_instances: Optional[int] = None,
                   instances: Optional[str] = None, sampling: Any = None, seed: int = 0,
                   num_samples: int = 1000, max_concurrent_episodes: int = 16, callbacks: Any = None,
                   echo=print) -> TournamentResult:
    """Check everything, load the players, play the round robin into ``out_dir`` (new),
    rate the players and write the table, the plot and the files."""
    sampling = sampling or SamplingConfig()
    players, seats, rows = check_tournament(specs, game, instances)
    out_dir = Path(out_dir)
    if out_dir.exists():
        raise PopulationError(f"{out_dir} exists already: a tournament writes into a new folder (-o NEW)")
    picked = pick_instances(rows, num_instances, seed)
    partners, _ = load_players(players, sampling)
    seatings = [(a.name, b.name) for i, a in enumerate(players) for b in players[i + 1:]]
    seatings = [s for pair in seatings for s in (pair, pair[::-1])]
    out_dir.mkdir(parents=True)
    staging = out_dir / ".seatings"
    matches, skill, lines = [], OpenSkill(), []
    for k, seating in enumerate(seatings):
        echo(f"[{k + 1}/{len(seatings)}] {seating[0]} ({seats[0]}) vs {seating[1]} ({seats[1]}): "
             f"{len(picked)} instance(s)")
        results = play_seating(None, game, seats, seating, picked, instances_file=instances, num_repeats=1,
                               sampling=sampling, records_dir=staging, run_name=f"{k:03d}",
                               max_concurrent_episodes=max_concurrent_episodes, seed=seed + k,
                               callbacks=callbacks, partners=partners)
        for model_dir in (staging / f"{k:03d}").iterdir():  # one results root for `clem score`
            model_dir.rename(out_dir / model_dir.name)
        for r in results:
            score = r.score(0)
            matches.append(Match(r.players[0], r.players[1], score, r.game, r.instance, seat=0))
            skill.update_match(r.players[0], r.players[1], score)
            lines.append(json.dumps({"players": list(r.players), "seats": list(seats), "rewards": list(r.rewards),
                                     "score": score, "game": r.game, "instance": r.instance}))
    shutil.rmtree(staging, ignore_errors=True)
    if not matches:
        raise PopulationError("the tournament played no match")
    # a finished round robin: Bradley–Terry (order-free) with bootstrap intervals is the
    # point estimate; Elo's bootstrap (random match orders) is kept beside it
    ratings = bootstrap_bradley_terry(matches, num_samples=num_samples, seed=seed)
    elo = bootstrap_elo(matches, num_samples=num_samples, seed=seed)
    table = ratings_table(matches, bootstrap=ratings, openskill=skill, rating_name="Bradley–Terry")
    (out_dir / "matches.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    write_text(out_dir / "ratings.md", table + "\n")
    write_json(out_dir / "ratings.json", {
        "game": game, "players": [p.name for p in players], "instances": len(picked), "seatings": len(seatings),
        "created": datetime.now().isoformat(timespec="seconds"), "bootstrap_samples": num_samples,
        "bradley_terry": {n: {"rating": r, "low": lo, "high": hi} for n, (r, lo, hi) in ratings.items()},
        "elo": {n: {"rating": r, "low": lo, "high": hi} for n, (r, lo, hi) in elo.items()},
        "openskill": {n: {"mu": mu, "sigma": sigma} for n, (mu, sigma) in skill.ratings.items()}})
    plot_intervals(ratings, out_dir / "ratings.png", f"{game}: Bradley–Terry ratings (Elo scale), 95% "
                                                     f"bootstrap intervals, {len(matches)} matches")
    return TournamentResult(out_dir, tuple(p.name for p in players), tuple(matches), ratings, table)


def plot_intervals(ratings: dict, path: Path, title: str) -> Path:
    """Each player's rating with its interval, best on top."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    order = sorted(ratings, key=lambda n: ratings[n][0])
    fig, ax = plt.subplots(figsize=(7, 1.2 + 0.45 * len(order)))
    values = [ratings[n][0] for n in order]
    low = [ratings[n][0] - ratings[n][1] for n in order]
    high = [ratings[n][2] - ratings[n][0] for n in order]
    ax.errorbar(values, range(len(order)), xerr=[low, high], fmt="o", capsize=4)
    ax.set_yticks(range(len(order)), order)
    ax.set_xlabel("rating (Elo scale)")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
