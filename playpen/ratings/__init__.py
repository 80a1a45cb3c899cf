"""Ratings of players from match results: Elo, OpenSkill (Plackett–Luce), Bradley–Terry,
bootstrap confidence intervals, a per-epoch history with its plot, a markdown table.

Used by the population trainers (ratings updated after every match, one snapshot per
epoch) and by ``playpen tournament`` (ratings with confidence intervals over a round
robin). Everything here is plain Python plus numpy; matplotlib is imported only to plot.
One module per idea: ``matches`` (the :class:`Match` record, :class:`RatingError`),
``elo``, ``openskill``, ``bradley_terry``, ``intervals`` (bootstrap), ``history`` (per-epoch
snapshots and their plot), ``table``.

Which rating to read (docs/populations.md, "Ratings", says more):

- :class:`Elo` — one number per player, updated match by match with step ``k``. Recent
  matches weigh more, so it tracks a player that changes (a learner during training), but
  it depends on the order of the matches and never settles below a noise floor set by
  ``k``.
- :class:`OpenSkill` — a Gaussian belief (mu, sigma) per player, the Plackett–Luce model of
  Weng & Lin (2011): any number of teams per game, ties, and an uncertainty that shrinks
  as a player is seen. :meth:`OpenSkill.ordinal` (mu − 3 sigma) is a conservative rank.
- :func:`fit_bradley_terry` — the maximum-likelihood ratings of all matches at once, on
  the Elo scale: order-independent, the right point estimate for a finished tournament.
- :func:`bootstrap_elo` / :func:`bootstrap_bradley_terry` — 95 % intervals by resampling
  matches.

Bad input (a player named twice in one match, a score outside [0, 1], ranks that do not
match the teams, an empty team) raises :class:`RatingError`, a ``ValueError`` with a one-line
message.
"""

from playpen.ratings.bradley_terry import fit_bradley_terry
from playpen.ratings.elo import Elo, elo_from_matches
from playpen.ratings.history import RatingHistory, plot_ratings
from playpen.ratings.intervals import bootstrap_bradley_terry, bootstrap_elo
from playpen.ratings.matches import ELO_SCALE, Match, RatingError
from playpen.ratings.openskill import OpenSkill, openskill_from_matches
from playpen.ratings.table import ratings_table

__all__ = ["ELO_SCALE", "Elo", "Match", "OpenSkill", "RatingError", "RatingHistory",
           "bootstrap_bradley_terry", "bootstrap_elo", "elo_from_matches", "fit_bradley_terry",
           "openskill_from_matches", "plot_ratings", "ratings_table"]
