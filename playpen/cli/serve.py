"""`playpen serve`: one game as an OpenEnv server (:func:`playpen.envs.interop.openenv_app`),
the wire protocol of `clem serve` with playpen's game lookup, instance sets and rewards."""
from __future__ import annotations

import socket

import click

from playpen.cli import split_values
from playpen.envs.turns import MAX_TURNS_HELP, check_max_turns


def parse_env_agents(values) -> dict[str, str]:
    agents = {}
    for item in split_values(values):
        seat, sep, model = item.partition("=")
        if not sep or not seat.strip() or not model.strip():
            raise click.BadParameter(f"'{item}' is not SEAT=MODEL (e.g. player_1=programmatic)",
                                     param_hint="'-e' / '--env-agent'")
        agents[seat.strip()] = model.strip()
    return agents


def check_port_free(host: str, port: int):
    with socket.socket() as probe:
        try:
            probe.bind((host, port))
        except OSError as e:
            raise click.BadParameter(f"cannot listen on {host}:{port}: {e.strerror}",
                                     param_hint="'--host' / '--port'") from e


@click.command("serve")
@click.option("-g", "--game", required=True,
              help="The game: a registered name (`playpen list games`), SOURCE:GAME or a game folder.")
@click.option("-l", "--learner-agent", default="player_0", show_default=True,
              help="The seat the client plays: player_0 is the master's first player, player_1 the next...")
@click.option("-e", "--env-agent", "env_agents", multiple=True, metavar="SEAT=MODEL",
              help="Who plays another seat: programmatic or a registered model (repeatable or comma-separated).")
@click.option("-i", "--instances", default=None,
              help="Instances file stem in the game's in/ folder (instances_train: its training split) "
                   "[default: the game's own].")
@click.option("--single-pass", is_flag=True, help="Go through the instances once instead of cycling.")
@click.option("-T", "--temperature", type=click.FloatRange(min=0.0), default=0.0, show_default=True,
              help="Sampling temperature of model env agents.")
@click.option("-L", "--max-tokens", type=click.IntRange(min=1), default=300, show_default=True,
              help="Tokens per turn of model env agents.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (0.0.0.0: every interface).")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option("-r", "--results-dir", default="playpen-records/openenv", show_default=True,
              help="Every episode is written here in clemcore's results layout.")
@click.option("--max-turns", type=int, default=None, help=MAX_TURNS_HELP)
def serve_command(game, learner_agent, env_agents, instances, single_pass, temperature, max_tokens, host, port,
                  results_dir, max_turns):
    """Serve GAME as an OpenEnv environment: the client plays one seat, env agents the others.

    Same endpoints and messages as `clem serve` (POST /reset, POST /step with
    {"action": {"response": TEXT}}, GET /state, /health, /schema, websocket /ws; clemcore's
    ClemGameEnv client works), with the game found as playpen finds it, instances_train
    offline, and end-of-episode rewards from the game's own scores (success 1, failure 0,
    aborted -1; per role where the game says who won). See docs/interop.md.

    \b
    Examples:
      playpen serve -g taboo -l player_1 -e player_0=programmatic
      playpen serve -g wordle -i instances_train --port 8001
    """
    agents = parse_env_agents(env_agents)
    check_max_turns(max_turns)
    check_port_free(host, port)
    import uvicorn

    from playpen.envs.interop import openenv_app  # seats and names are checked before a model loads
    app = openenv_app(game, learner_agent=learner_agent, env_agents=agents, instances=instances,
                      single_pass=single_pass, gen_args=dict(temperature=temperature, max_tokens=max_tokens),
                      results_dir=results_dir, max_turns=max_turns)
    click.echo(f"serving {game} on http://{host}:{port} (the client plays {learner_agent}); episodes in {results_dir}")
    uvicorn.run(app, host=host, port=port, log_level="warning")
