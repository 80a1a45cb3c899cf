"""What the game test files share: importing a game folder's modules, its instance sets,
driving an episode through the game master and the scorer, and the real `clem run` /
`clem score` / `clem eval` end to end.

Imported as ``gametest`` (pytest puts tests/games on sys.path); no game folder ever goes
on sys.path: every game has a master.py, and one must not shadow another's. clemcore is
imported inside the functions only, so that a test file decides what it imports first.
"""
import csv
import functools
import importlib.util
import json
import sys
from collections.abc import Mapping
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILTIN_GAMES = REPO_ROOT / "playpen" / "games" / "builtin"
RECORDS_DIR = REPO_ROOT / "tests" / "fixtures" / "clembench-runs-v2.0"
SPLITS = (("eval", "instances"), ("train", "instances_train"))  # generator split, instances file


# --- a game folder ----------------------------------------------------------------------------

def load_module(game_dir: Path, name: str, stem: str = None):
    """Import ``game_dir/<stem or name>.py`` as module `name` (once). Helper modules keep
    their own, game-unique names, as clemcore's sys.path entry makes master.py import them,
    so that master.py finds the very same modules; a master.py gets a unique name."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(game_dir) / f"{stem or name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def load_instances(game_dir: Path, stem: str) -> dict:
    return json.loads((Path(game_dir) / "in" / f"{stem}.json").read_text(encoding="utf-8"))


def all_instances(instances: dict):
    """(experiment, instance) for every instance of an instance set."""
    for experiment in instances["experiments"]:
        for instance in experiment["game_instances"]:
            yield experiment, instance


def generated_instances(generator, folder: Path, stem: str, **generate_kwargs) -> dict:
    """Let an instance generator write ``folder/in/<stem>.json``; returns what it wrote."""
    generator.game_path = str(folder)
    generator.generate(f"{stem}.json", **generate_kwargs)
    return load_instances(folder, stem)


@functools.cache
def benchmark(benchmark_class, game_dir: Path, game_name: str = None):
    """The game's benchmark, built from its master module's class (not via clemcore's
    loader, which imports master.py under the plain name ``master``); one per test session.
    `game_name`: the spec to use where clemgame.json lists several (default: the first)."""
    from clemcore.clemgame.registry import GameSpec
    specs = GameSpec.from_directory(str(game_dir))
    return benchmark_class(specs[0] if game_name is None else next(s for s in specs if s.game_name == game_name))


# --- episodes ---------------------------------------------------------------------------------

def context(text: str) -> dict:
    return {"role": "user", "content": text}


def start_episode(bench, experiment: dict, instance: dict, models=None):
    """Set up a game master for `instance` as clemcore's runner does (setup, then a recorder
    that knows the players, then before_game); returns (game master, recorder). `models`:
    the player models (default: the games' programmatic players in every role)."""
    from clemcore.backends.model_registry import CustomResponseModel
    from clemcore.clemgame.recorder import GameInteractionsRecorder
    if models is None:
        models = [CustomResponseModel()] * bench.game_spec.players
    gm = bench.create_game_master(experiment, models)
    gm.setup(**instance)
    recorder = GameInteractionsRecorder(bench.game_name, experiment["name"], instance["game_id"], "test", {})
    for player in gm.get_players():
        recorder.log_player(player.name, player.game_role, player.model.name)
    gm.register(recorder)
    gm.before_game()
    return gm, recorder


def score_episode(bench, experiment: dict, instance: dict, interactions: dict) -> dict:
    """The episode scores, computed from the interactions as `clem score` reads them from
    interactions.json (so they must survive the JSON round trip)."""
    scorer = bench.create_game_scorer(experiment, instance)
    scorer.compute_scores(json.loads(json.dumps(interactions)))
    return scorer.scores["episode scores"]


def play_to_end(gm, responses=None, *, max_steps: int = 100) -> int:
    """Step a started episode to its end; returns the number of requests. `responses`
    scripts the replies: None (the players answer themselves), replies in turn order, or
    {game role: replies} (each player takes the next reply of its role)."""
    if isinstance(responses, Mapping):
        by_role = {role: iter(replies) for role, replies in responses.items()}
        next_reply = lambda player: next(by_role[player.game_role])  # noqa: E731
    elif responses is not None:
        in_turn_order = iter(responses)
        next_reply = lambda player: next(in_turn_order)  # noqa: E731
    done, steps = False, 0
    while not done:
        player = gm.current_player
        if responses is None:
            reply = player(gm.get_context_for(player))
        else:
            assert gm.get_context_for(player) is not None
            reply = next_reply(player)
        done, _ = gm.step(reply)
        steps += 1
        assert steps < max_steps
    return steps


def play_episode(bench, experiment: dict, instance: dict, responses=None, *, models=None):
    """Play one episode to its end (see :func:`play_to_end` for `responses`) and score it.
    Returns (game master, interactions as written to interactions.json, episode scores,
    number of requests)."""
    gm, recorder = start_episode(bench, experiment, instance, models)
    steps = play_to_end(gm, responses)
    interactions = json.loads(json.dumps(recorder.interactions))  # must survive the file round trip
    return gm, interactions, score_episode(bench, experiment, instance, interactions), steps


def outcome(scores: dict) -> str:
    """Aborted, Success or Lose: exactly one of them."""
    assert scores["Aborted"] + scores["Success"] + scores["Lose"] == 1
    return next(key for key in ("Aborted", "Success", "Lose") if scores[key] == 1)


# --- end to end with the real clem CLI --------------------------------------------------------

def clem_run_score_eval(clem, workspace: Path, game: str, model: str = "programmatic", then=None) -> Path:
    """`clem run -g GAME -m MODEL`, `clem score -g GAME` and `clem eval` in `workspace` (GAME:
    a game name or a JSON game selector); returns the results folder. `clem` runs them: the
    console script in a process of its own (the ``clem`` fixture) or clemcore's entry point in
    this one (``clem_here``, without an interpreter's start-up each); `then`, when given, runs
    score and eval (taboo's test: the console script plays, the entry point scores)."""
    run = clem(["run", "-g", game, "-m", model], cwd=workspace)
    results = workspace / "results"
    played = results / model if game.startswith("{") else results / model / game
    assert played.is_dir(), run.stderr[-2000:] if run is not None else f"clem run wrote no {played}"
    (then or clem)(["score", "-g", game], cwd=workspace)
    (then or clem)(["eval"], cwd=workspace)
    return results


def episode_scores(results: Path, game: str, model: str = "programmatic") -> list[dict]:
    """The episode scores of every scored instance of `game`, in folder order."""
    return [json.loads(path.read_text(encoding="utf-8"))["episode scores"]
            for path in sorted(results.glob(f"{model}/{game}/*/instance_*/scores.json"))]


def results_row(results: Path, model: str = "programmatic") -> dict:
    """`model`'s row of the results.csv that `clem eval` wrote."""
    with open(results / "results.csv", encoding="utf-8") as f:
        return next(row for row in csv.DictReader(f) if row[""] == model)
