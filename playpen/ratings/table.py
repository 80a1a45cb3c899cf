"""A markdown table of players' ratings and results."""
from __future__ import annotations

import math
from typing import Iterable, Mapping, Optional

from playpen.ratings.elo import elo_from_matches
from playpen.ratings.matches import Match, RatingError, _check_matches, _players
from playpen.ratings.openskill import OpenSkill, openskill_from_matches


def ratings_table(matches: Iterable[Match],
                  bootstrap: Optional[Mapping[str, tuple[float, float, float]]] = None,
                  openskill: Optional[OpenSkill] = None, initial: float = 1000.0,
                  k: float = 32.0, rating_name: str = "Elo") -> str:
    """A markdown table, one row per player, best first: Elo (with its 95 % interval when
    ``bootstrap`` results are given — from :func:`bootstrap_elo` or
    :func:`bootstrap_bradley_terry` — else Elo replayed in match order), OpenSkill mu, sigma
    and ordinal (``openskill`` or, without it, replayed from the matches), wins, draws,
    losses and matches (a score above 0.5 counts as a win). ``rating_name`` heads the rating
    column (say "Bradley–Terry" for :func:`bootstrap_bradley_terry` results)."""
    matches = _check_matches(matches)
    names = _players(matches)
    if bootstrap is None:
        elo = elo_from_matches(matches, initial, k)
        rating = {n: (elo.rating(n), None, None) for n in names}
    else:
        missing = [n for n in names if n not in bootstrap]
        if missing:
            raise RatingError(f"the bootstrap results have no rating for {', '.join(missing)}")
        rating = {n: tuple(bootstrap[n]) for n in names}
    skill = openskill if openskill is not None else openskill_from_matches(matches)
    counts = {n: [0, 0, 0] for n in names}  # wins, draws, losses
    for m in matches:
        ca, cb = counts[m.a], counts[m.b]
        if m.score_a > 0.5:
            ca[0] += 1
            cb[2] += 1
        elif m.score_a < 0.5:
            ca[2] += 1
            cb[0] += 1
        else:
            ca[1] += 1
            cb[1] += 1
    lines = [f"| player | {rating_name} | 95 % CI | mu | sigma | ordinal | wins | draws | losses | matches |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name in sorted(names, key=lambda n: (-rating[n][0], n)):
        point, lo, hi = rating[name]
        ci = "n/a" if lo is None or math.isnan(lo) else f"{lo:.0f} – {hi:.0f}"
        mu, sigma = skill.rating(name)
        wins, draws, losses = counts[name]
        shown = name.replace("|", "\\|")  # a '|' in a name would end the cell
        lines.append(f"| {shown} | {point:.0f} | {ci} | {mu:.2f} | {sigma:.2f} | "
                     f"{skill.ordinal(name):.2f} | {wins} | {draws} | {losses} | {wins + draws + losses} |")
    return "\n".join(lines) + "\n"
