"""playpen's games as standard environments (docs/interop.md): clemcore's own PettingZoo and
Gymnasium wrappers and its OpenEnv server (`clem serve`), and the same stacks as
`playpen.envs.interop` builds them. Every episode is played to its end by the games' own
programmatic players or by scripted agents; servers listen on 127.0.0.1 only, on a free port,
and are asked over real HTTP (and clemcore's websocket client)."""
import json
import os
import re
import socket
import subprocess
import threading
import sys
import time
import urllib.request

import pytest

from conftest import GAMES_DIR, REPO_ROOT, clem_executable
from rollout_helpers import TOYGAMES_DIR

from playpen.envs.interop import gymnasium_env, openenv_app, pettingzoo_env
from playpen.registry import game_entries

PACKAGED = [e.name for e in game_entries(scan_cwd=False) if e.qualifier == "playpen"]


def full_entry(game: str) -> dict:
    """A game_registry.json entry for a toy game as clemcore 3.7 reads it: a whole spec (a bare
    ``{"game_name", "game_path"}`` entry is skipped by clemcore with a warning)."""
    folder = TOYGAMES_DIR / game
    return dict(json.loads((folder / "clemgame.json").read_text()), game_path=str(folder))


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """playpen's games plus two third-party games registered one by one: relay (new master
    API, 2 players) and countdown (clemcore's legacy master API)."""
    (tmp_path / "game_registry.json").write_text(json.dumps([
        {"benchmark_path": str(GAMES_DIR)}, full_entry("relay"), full_entry("countdown")]), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def play_aec(env, policy):
    """Play one episode of an AEC env; `policy(env, agent, observation)` answers. Returns the
    reward each agent saw at its end and the number of live turns."""
    env.reset()
    final, turns = {}, 0
    for agent in env.agent_iter(max_iter=500):
        observation, reward, terminated, truncated, _ = env.last()
        if terminated or truncated:
            final[agent] = reward
            env.step(None)
            continue
        env.step(policy(env, agent, observation))
        turns += 1
    return final, turns


def own_player(env, agent, observation):
    """The seat's own programmatic player answers (it keeps its memory, as in clemcore's runners)."""
    return env.unwrapped.player_by_agent_id[agent](observation)


def countdown_bisection():
    """A scripted countdown player: bisects 1..5 from the game's higher/lower hints."""
    bounds = [1, 5]

    def answer(observation):
        text = observation["content"]
        if "higher" in text:
            bounds[0] = answer.last + 1
        elif "lower" in text:
            bounds[1] = answer.last - 1
        answer.last = (bounds[0] + bounds[1]) // 2
        return f"NUMBER: {answer.last}"
    return answer


def scripted_judge(debate: str) -> str:
    """A scripted debate judge: the debater with a CHECK line that holds wins."""
    for side, turn in re.findall(r"=== Debater ([AB]), round \d+ ===\n(.*?)(?====)", debate, re.S):
        for left, right in re.findall(r"^CHECK: ([0-9+\-*/() ]+)=\s*(\d+)\s*$", turn, re.M):
            if eval(left) == int(right):
                return f"The check of Debater {side} holds.\nVERDICT: {side}"
    return "VERDICT: A"


# ----------------------------------------------------------------------------- PettingZoo

@pytest.mark.parametrize("game", PACKAGED)
def test_every_packaged_game_plays_to_its_end_in_clemcores_and_playpens_pettingzoo_env(workspace, game):
    from playpen.clem import clemgame
    stock, playpens = clemgame().env(game, single_pass=True), pettingzoo_env(game, single_pass=True)
    for env in (stock, playpens):
        final, turns = play_aec(env, own_player)
        assert turns >= 1 and set(final) == {f"player_{i}" for i in range(len(final))}
        assert not env.agents, "every agent was removed at the end"
        # the programmatic players win every packaged game's first instance (clemcore's reward
        # 1.0 for success, to every seat; playpen's to the winner's seat, see below)
        assert max(final.values()) == 1.0 and (env is playpens or set(final.values()) == {1.0}), (game, final)
        env.close()
    assert playpens.unwrapped.last_outcome.outcome == "success"


@pytest.mark.filterwarnings("ignore:.*(NumPy array|spaces.box):UserWarning")
@pytest.mark.parametrize("game", ["taboo", "debate", "privateshared", "wordle", "countdown", "relay"])
def test_playpens_pettingzoo_env_passes_pettingzoos_own_api_test(workspace, game):
    """Random text actions (mostly aborted episodes), rewards, terminations, spaces: PettingZoo's
    checker. clemcore's own env fails it twice: its Text spaces hold letters and digits only,
    and it zeroes `rewards` before a caller can read them."""
    from pettingzoo.test import api_test
    env = pettingzoo_env(game)
    api_test(env, num_cycles=20)
    env.close()


def test_a_game_that_says_who_won_rewards_each_role(workspace):
    """adversarial_taboo logs `Attacker Win`/`Defender Win`: the winner's seat gets 1, the
    loser's 0 (clemcore's env gives both seats the one outcome)."""
    env = pettingzoo_env("adversarial_taboo", single_pass=True)
    final, _ = play_aec(env, own_player)
    outcome = env.unwrapped.last_outcome
    roles = {a: p.game_role for a, p in env.unwrapped.player_by_agent_id.items()}
    winner = next(role for role in ("Attacker", "Defender") if outcome.episode_scores.get(f"{role} Win"))
    assert {roles[a]: r for a, r in final.items()} == {winner: 1.0, ({"Attacker", "Defender"} - {winner}).pop(): 0.0}


def test_a_legacy_master_game_is_rewarded_by_its_outcome(workspace):
    """countdown uses clemcore's legacy master, which never sets `state.outcome`: clemcore's
    default reward is 0 for a won episode; playpen reads the game's own scores."""
    from playpen.clem import clemgame
    scripted = countdown_bisection()
    stock, _ = play_aec(clemgame().env("countdown", single_pass=True), lambda e, a, o: scripted(o))
    scripted = countdown_bisection()
    env = pettingzoo_env("countdown", single_pass=True)
    final, turns = play_aec(env, lambda e, a, o: scripted(o))
    assert env.unwrapped.last_outcome.outcome == "success" and final == {"player_0": 1.0}
    assert stock == {"player_0": 0.0}
    final, turns = play_aec(env, lambda e, a, o: "I'd rather not say")
    assert (final, turns) == ({"player_0": -1.0}, 1) and env.unwrapped.last_outcome.outcome == "aborted"


def test_a_bare_registry_entry_takes_its_fields_from_the_games_clemgame_json(tmp_path, monkeypatch):
    """`{"game_name", "game_path"}` as docs/own-games.md shows it: playpen fills the rest from
    the folder's clemgame.json (players, roles, ...), so the envs can seat its players."""
    (tmp_path / "game_registry.json").write_text(json.dumps(
        [{"game_name": "relay", "game_path": str(TOYGAMES_DIR / "relay")}]), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    from playpen.registry import resolve_game
    assert resolve_game("relay").spec["players"] == 2
    from click.testing import CliRunner
    from playpen.cli import cli
    listed = CliRunner().invoke(cli, ["list", "games"])
    assert re.search(r"relay\s+2p\s+\S+\s+Toy: a Speaker relays", listed.output), listed.output
    final, _ = play_aec(pettingzoo_env("relay", single_pass=True), own_player)
    assert final == {"player_0": 1.0, "player_1": 1.0}


# ----------------------------------------------------------------------------- Gymnasium

def test_gymnasium_env_learner_in_the_second_seat_of_a_two_player_game(workspace):
    """taboo: the caller guesses (player_1), the programmatic describer (loaded by name) clues."""
    env = gymnasium_env("taboo", learner_agent="player_1", env_agents={"player_0": "programmatic"},
                        single_pass=True)
    observation, _ = env.reset()
    assert observation["content"].count("CLUE:") >= 1
    rewards, done = [], False
    while not done:
        observation, reward, done, truncated, info = env.step("GUESS: xylophone")
        rewards.append(reward)
    assert rewards == [0.0, 0.0, 0.0]  # three wrong guesses: lost, not aborted
    assert env.env.unwrapped.last_outcome.outcome == "failure"
    env.close()


def test_gymnasium_env_plays_the_training_split_and_a_third_party_game(workspace):
    env = gymnasium_env("taboo", learner_agent="player_1", env_agents={"player_0": "programmatic"},
                        instances="instances_train")
    env.reset()
    train = json.loads((GAMES_DIR / "builtin" / "taboo" / "in" / "instances_train.json").read_text())
    first = train["experiments"][0]["game_instances"][0]
    assert env.env.unwrapped.game_instance == first
    env.close()
    env = gymnasium_env("relay", learner_agent="player_1", env_agents={"player_0": "programmatic"},
                        single_pass=True)
    observation, _ = env.reset()
    word = re.search(r"WORD:\s*(\w+)", observation["content"]).group(1)
    _, reward, done, _, _ = env.step(f"GUESS: {word}")
    assert done and reward == 1.0


# ----------------------------------------------------------------------------- OpenEnv

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(base: str, path: str, body=None) -> dict:
    request = urllib.request.Request(base + path, method="GET" if body is None else "POST",
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def wait_healthy(base: str, alive=lambda: True, timeout: float = 120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert alive(), "the server exited"
        try:
            if call(base, "/health")["status"] == "healthy":
                return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(base)


@pytest.fixture
def clem_serve(workspace):
    """Run the real `clem serve` in the workspace; yields a starter returning the base URL."""
    processes = []

    def start(*args):
        port = free_port()
        log = open(workspace / f"serve-{port}.log", "w")
        process = subprocess.Popen([clem_executable(), "serve", *args, "--host", "127.0.0.1",
                                    "--port", str(port), "-r", str(workspace / "openenv-records")],
                                   cwd=workspace, stdout=log, stderr=subprocess.STDOUT)
        processes.append(process)
        base = f"http://127.0.0.1:{port}"
        wait_healthy(base, alive=lambda: process.poll() is None)
        return base
    yield start
    for process in processes:
        process.terminate()
        process.wait(timeout=30)


def test_clem_serve_plays_a_registered_third_party_game_over_http_and_websocket(workspace, clem_serve):
    """The real `clem serve` CLI on relay (registered one by one): an episode over plain HTTP,
    then one through clemcore's websocket client."""
    from playpen.clem import clemgame
    base = clem_serve("-g", "relay", "-l", "player_1", "-e", "player_0=programmatic")
    first = call(base, "/reset", {})
    assert first["done"] is False and "WORD:" in first["observation"]["context"]["content"]
    steps = []
    while not steps or not steps[-1]["done"]:
        steps.append(call(base, "/step", {"action": {"response": "GUESS: xylophone"}}))
    assert [s["reward"] for s in steps] == [0.0, 0.0]  # two wrong guesses: lost, not aborted
    assert call(base, "/state")["step_count"] == 2
    with clemgame().ClemGameEnv(base_url=base).sync() as client:
        result = client.reset()
        word = re.search(r"WORD:\s*(\w+)", result.observation.context["content"]).group(1)
        result = client.step(clemgame().ClemGameAction(response=f"GUESS: {word}"))
    assert result.done and result.reward == 1.0
    records = list((workspace / "openenv-records").rglob("interactions.json"))
    assert len(records) == 2 and json.loads(records[0].read_text())["meta"]["game_name"] == "relay"


def test_clemcores_server_app_plays_a_packaged_two_player_game(workspace, serve_app):
    """What `clem serve -g taboo -l player_1 -e player_0=programmatic` runs, in this process."""
    from clemcore.clemgame.envs.openenv.server.app import create_clemv_app
    base = serve_app(create_clemv_app("taboo", learner_agent="player_1", env_agents={"player_0": "programmatic"},
                                      results_dir=str(workspace / "openenv-records")))
    first = call(base, "/reset", {})
    assert first["done"] is False and "CLUE:" in first["observation"]["context"]["content"]
    steps = []
    while not steps or not steps[-1]["done"]:
        steps.append(call(base, "/step", {"action": {"response": "GUESS: xylophone"}}))
    assert [s["reward"] for s in steps] == [0.0, 0.0, 0.0]
    records = list((workspace / "openenv-records").rglob("interactions.json"))
    assert records and json.loads(records[0].read_text())["meta"]["game_name"] == "taboo"


@pytest.fixture
def serve_app():
    """Serve an ASGI app with uvicorn in a thread on 127.0.0.1; yields a starter."""
    import uvicorn
    servers = []

    def start(app):
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        servers.append((server, thread))
        base = f"http://127.0.0.1:{port}"
        wait_healthy(base, alive=thread.is_alive)
        return base
    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join(timeout=30)


def test_playpens_openenv_app_rewards_a_legacy_game_and_seats_a_judge(workspace, serve_app):
    base = serve_app(openenv_app("countdown", single_pass=True))
    scripted = countdown_bisection()
    result = call(base, "/reset", {})
    while not result["done"]:
        result = call(base, "/step", {"action": {"response": scripted(result["observation"]["context"])}})
    assert result["reward"] == 1.0  # `clem serve -g countdown` says 0.0 for the same episode
    # debate, three seats: the caller judges two programmatic debaters
    base = serve_app(openenv_app("debate", learner_agent="player_2",
                                 env_agents={"player_0": "programmatic", "player_1": "programmatic"}))
    result = call(base, "/reset", {})
    verdict = scripted_judge(result["observation"]["context"]["content"])
    result = call(base, "/step", {"action": {"response": verdict}})
    assert result["done"] and result["reward"] == 1.0


def test_a_broken_game_name_is_refused_before_serving(workspace):
    from playpen.errors import UnknownGameError
    with pytest.raises(UnknownGameError, match="unknown game 'tabo'"):
        openenv_app("tabo")


def test_playpen_serve_rewards_a_legacy_game_and_writes_its_episodes(workspace):
    port = free_port()
    records = workspace / "served"
    process = subprocess.Popen([sys.executable, "-m", "playpen", "serve", "-g", "countdown",
                                "--port", str(port), "-r", str(records)], cwd=workspace,
                               env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_healthy(base, alive=lambda: process.poll() is None)
        scripted = countdown_bisection()
        result = call(base, "/reset", {})
        while not result["done"]:
            result = call(base, "/step", {"action": {"response": scripted(result["observation"]["context"])}})
        assert result["reward"] == 1.0
    finally:
        process.terminate()
        output = process.communicate(timeout=30)[0]
    assert f"serving countdown on http://127.0.0.1:{port}" in output
    episodes = list(records.rglob("interactions.json"))
    assert episodes and json.loads(episodes[0].read_text())["meta"]["game_name"] == "countdown"


@pytest.mark.parametrize("args, message", [
    (["-g", "taboo"], "game 'taboo': nobody plays player_1; give each an env agent"),
    (["-g", "taboo", "-l", "player_2", "-e", "player_0=programmatic"], "has the seats player_0, player_1: no seat player_2"),
    (["-g", "taboo", "-l", "player_1", "-e", "player_0"], "'player_0' is not SEAT=MODEL"),
    (["-g", "taboo", "-l", "player_1", "-e", "player_0=no-such-model"], "unknown model 'no-such-model'"),
])
def test_playpen_serve_refuses_bad_seats_in_one_line(workspace, args, message):
    from click.testing import CliRunner
    from playpen.cli import cli
    result = CliRunner().invoke(cli, ["serve", *args, "--port", str(free_port())])
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output


def test_playpen_serve_refuses_a_busy_port(workspace):
    from click.testing import CliRunner
    from playpen.cli import cli
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        result = CliRunner().invoke(cli, ["serve", "-g", "wordle", "--port", str(busy.getsockname()[1])])
    assert result.exit_code == 2 and "cannot listen on 127.0.0.1:" in result.output


def test_the_interop_pages_code_runs_as_written(workspace, serve_app, capsys):
    """docs/interop.md: its in-process block as is, its client block against a live server."""
    page = (REPO_ROOT / "docs" / "interop.md").read_text(encoding="utf-8")
    # the first two blocks; the third (stock GRPOTrainer on a game) needs a model that makes tool
    # calls: tests/test_trl_env.py runs it with the tiny model as far as that goes
    client, local = re.findall(r"```python\n(.*?)```", page, re.S)[:2]
    exec(compile(local, "docs/interop.md", "exec"), {})
    assert re.search(r"player_0 ends with -?[01]\.0\nplayer_1 ends with -?[01]\.0", capsys.readouterr().out)
    base = serve_app(openenv_app("taboo", learner_agent="player_1", env_agents={"player_0": "programmatic"}))
    exec(compile(client.replace("http://127.0.0.1:8000", base), "docs/interop.md", "exec"), {})
    assert capsys.readouterr().out.strip() in ("0.0", "1.0")


def test_a_registered_model_plays_a_seat(tiny_workspace):
    """env agents by name load like playpen's partners: the tiny random model describes."""
    env = gymnasium_env("taboo", learner_agent="player_1", env_agents={"player_0": "tiny-random"},
                        gen_args=dict(temperature=0.0, max_tokens=8), single_pass=True)
    env.reset()
    describer = env.env.unwrapped.player_by_agent_id["player_0"]
    assert describer.model.name == "tiny-random"
    env.close()


# ----------------------------------------------------------------------------- the turn limit

@pytest.fixture
def stubborn_workspace(tmp_path, monkeypatch):
    """stubborn (a round ends only on a valid move) registered one by one."""
    (tmp_path / "game_registry.json").write_text(json.dumps([full_entry("stubborn")]), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    from playpen.envs import turns
    monkeypatch.setattr(turns, "_said", set())  # the note is said once per game and process
    return tmp_path


def test_an_openenv_server_ends_an_endless_episode_at_the_turn_limit(stubborn_workspace, serve_app, capsys):
    """A client that never finds the format would play stubborn forever: as `playpen eval
    --max-turns`, the episode ends as aborted after the limit, with a note naming the game."""
    records = stubborn_workspace / "served"
    base = serve_app(openenv_app("stubborn", max_turns=3, results_dir=str(records)))
    result, steps = call(base, "/reset", {}), 0
    while not result["done"] and steps < 10:
        result = call(base, "/step", {"action": {"response": "I will not say"}})
        steps += 1
    assert steps == 3 and result["done"] and result["reward"] == -1.0
    assert "[playpen] stubborn: episode" in capsys.readouterr().err
    (episode,) = records.rglob("interactions.json")
    interactions = json.loads(episode.read_text())
    notes = [e["action"]["content"] for turn in interactions["turns"] for e in turn
             if e["action"]["type"] == "turn limit"]
    assert notes == ["playpen: the episode did not end within 3 turns (the turn limit, --max-turns): "
                     "ended as aborted"]
    assert interactions["Aborted"] == 1


def test_playpen_serve_passes_its_turn_limit_and_refuses_a_bad_one(stubborn_workspace, monkeypatch):
    from click.testing import CliRunner
    import uvicorn
    from playpen.cli import cli
    from playpen.envs import interop
    seen = []
    monkeypatch.setattr(interop, "openenv_app", lambda game, **options: seen.append(options["max_turns"]))
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: None)
    for args in ([], ["--max-turns", "5"], ["--max-turns", "0"]):
        result = CliRunner().invoke(cli, ["serve", "-g", "stubborn", "--port", str(free_port()), *args])
        assert result.exit_code == 0, result.output
    assert seen == [None, 5, 0]  # None: each game's own limit
    result = CliRunner().invoke(cli, ["serve", "-g", "stubborn", "--max-turns", "-1"])
    assert result.exit_code == 2 and "option --max-turns: -1 is not valid; expected an integer >= 0" in result.output
