"""Populations: many players on one base model, the trainers that grow them, tournaments.

- :mod:`~playpen.population.players`: :class:`Population` (adapter players, the bare base,
  partners; save/load) and :class:`PlayerSpec`;
- :mod:`~playpen.population.trainer`: :class:`PopulationPlayPen` with its ``entry()`` /
  ``match()`` / ``play()`` hooks, :class:`Entry`; its run's checkpoints
  (:mod:`~playpen.population.epoch_checkpoints`);
- :mod:`~playpen.population.matches`: :class:`MatchResult`, the reward of a match, playing a
  seating of a clemcore game;
- :mod:`~playpen.population.update`: :class:`Experience` and the policy-gradient update;
- :mod:`~playpen.population.leagues`: :class:`FictitiousSelfPlay`, :class:`League`, matchmaking;
- :mod:`~playpen.population.tournament`: round-robin tournaments (``playpen tournament``).

Importing this package loads no torch, transformers, peft or clemcore.
"""
from playpen.population.leagues import FictitiousSelfPlay, FSPOptions, League, LeagueOptions, deal, opponent_weights
from playpen.population.players import BASE, PlayerSpec, Population, PopulationError
from playpen.population.matches import MatchResult, play_seating
from playpen.population.trainer import Entry, PopulationOptions, PopulationPlayPen
from playpen.population.update import Experience, advantages, train_player

__all__ = ["BASE", "PlayerSpec", "Population", "PopulationError", "Entry", "MatchResult", "PopulationOptions",
           "PopulationPlayPen", "play_seating", "Experience", "advantages", "train_player", "FictitiousSelfPlay",
           "FSPOptions", "League", "LeagueOptions", "deal", "opponent_weights"]
