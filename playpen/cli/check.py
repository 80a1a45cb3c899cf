"""`playpen check`: the contract checker (:mod:`playpen.envs.check`) on one game."""
from __future__ import annotations

import sys

import click


@click.command("check")
@click.argument("game")
@click.option("-i", "--instances", default=None,
              help="Instances file stem in the game's in/ folder [default: the game's own].")
@click.option("--max-steps", type=int, default=200, show_default=True,
              help="An episode still running after this many steps counts as endless.")
@click.option("-n", "--num-episodes", type=int, default=2, show_default=True,
              help="Episodes to play with the game's programmatic players.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of `random` before each episode: programmatic players that draw at random give the "
                   "same verdicts on every run.")
def check_command(game, instances, max_steps, num_episodes, seed):
    """Check that GAME works with playpen: a registered name (`playpen list games`; SOURCE:GAME
    for a shadowed copy) or a game folder holding clemgame.json (every spec in it).

    Twelve checks — clemgame.json, the instances file, importing master.py, which player
    slots the master builds, programmatic players, then episodes played by them: contexts,
    endings, scores, outcome, forking, the interactions log; last, an episode whose model
    players reply in no format must end too (else only the turn limit ends it). Each line says pass, warn, fail
    or skip with the file, the defect and what is expected. Exit status 0 when no check
    failed, 1 when one did.

    \b
    Examples:
      playpen check taboo
      playpen check path/to/clembench/wordle
    """
    from playpen.envs.check import check_game
    report = check_game(game, instances=instances, max_steps=max_steps, num_episodes=num_episodes, seed=seed)
    for line in report.lines():
        click.echo(line)
    if not report.ok:
        sys.exit(1)
