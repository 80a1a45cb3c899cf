"""A contract checker for clemcore games, like gymnasium's ``check_env``:
``python -m playpen.envs.check GAME_NAME_OR_FOLDER``.

Longer than 400 lines: twelve checks of one contract, each with messages that name the
file, the defect and what is expected; they share one episode-playing core.

Each check (:data:`CHECKS`) passes, warns, fails or is skipped (one it needs did not pass),
with one line naming the file, what is wrong and what is expected. Errors in game code are
reported with the innermost frame inside the game folder, never as a traceback. Episodes
are played through :class:`GameEnv` by the game's programmatic players (``_custom_response``).
"""
from __future__ import annotations

import copy
import itertools
import json
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playpen.clem import clemcore, clemgame
from playpen.envs.game import GameEnv
from playpen.envs.loading import game_instance_rows, load_benchmark, probe_roles
from playpen.errors import PlaypenError
from playpen.outcomes import OUTCOMES, flag
from playpen.registry import read_json, resolve_game

PASS, WARN, FAIL, SKIP = "pass", "warn", "fail", "skip"
CHECKS = ("clemgame_json", "instances_file", "master_import", "player_slots", "programmatic_players",
          "episode_contexts", "episode_ends", "episode_scores", "episode_outcome", "fork", "interactions_log",
          "model_players")
REQUIRED_SCORES = ("Aborted", "Success", "Lose", "Main Score")
FALLBACK_RESPONSE = "playpen check: no programmatic player"
"""What a player without programmatic behaviour answers while its game is checked."""
STAND_IN_RESPONSE = "playpen check: a model's reply in no format the game asked for"
"""What every model-backed player answers in the ``model_players`` episode (a model that
never finds the format): the game must still end."""


@dataclass(frozen=True)
class CheckResult:
    name: str  # one of CHECKS; "[game_name]" appended when a clemgame.json holds several specs
    status: str  # "pass" | "warn" | "fail" | "skip"
    message: str


@dataclass(frozen=True)
class CheckReport:
    """The results of :func:`check_game`, in check order."""

    target: str
    results: tuple[CheckResult, ...]

    @property
    def ok(self) -> bool:
        """No check failed (warnings and skipped checks do not count)."""
        return not any(r.status == FAIL for r in self.results)

    def get(self, name: str) -> CheckResult:
        return next(r for r in self.results if r.name == name)

    def lines(self) -> list[str]:
        counts = ", ".join(f"{n} {s}" for s in (PASS, WARN, FAIL, SKIP)
                           if (n := sum(r.status == s for r in self.results)))
        return ([f"playpen check {self.target}"]
                + [f"{r.status.upper():<4}  {r.name}: {r.message}" for r in self.results]
                + [f"{'OK' if self.ok else 'FAILED'}: {counts}"])


class _Failed(Exception):
    """A check's one-line failure message."""


def _show(path: Any) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _inside(filename: str, folder: Path) -> bool:
    return bool(filename) and Path(filename).resolve().is_relative_to(folder)


def describe_error(error: BaseException, game_dir: Path) -> str:
    """``file:line: Type: message`` of the root cause, at its innermost frame inside ``game_dir``."""
    while error.__cause__ is not None:  # e.g. GameLoadError from playpen's loading
        error = error.__cause__
    text = f"{type(error).__name__}: {' '.join(str(error).split())}"
    if isinstance(error, SyntaxError) and error.filename:
        return f"{_show(error.filename)}:{error.lineno}: {text}"
    frames = traceback.extract_tb(error.__traceback__)
    inside = [f for f in frames if _inside(f.filename, game_dir)]
    if inside:
        return f"{_show(inside[-1].filename)}:{inside[-1].lineno}: {text}"
    return f"{_show(game_dir)}: {text}" + (f" (raised at {frames[-1].filename}:{frames[-1].lineno})" if frames else "")


def _read_json(path: Path) -> Any:
    try:
        return read_json(Path(_show(path)))  # malformed JSON: "file:line:col: malformed JSON: ..."
    except PlaypenError as e:
        raise _Failed(str(e)) from None


@dataclass
class _Episode:
    row: dict
    label: str
    env: Any = None
    steps: int = 0
    result: Any = None  # the final StepResult
    error: BaseException | None = None
    in_scorer: bool = False  # the error came from scoring the finished episode
    bad_context: str = ""


@dataclass
class _GameChecker:
    """The checks after clemgame_json, for one game spec; ``run`` records each result."""

    spec: dict
    folder: Path
    suffix: str
    max_steps: int
    num_episodes: int
    seed: int = 0
    results: list[CheckResult] = field(default_factory=list)
    benchmark: Any = None
    rows: list = field(default_factory=list)
    episodes: list[_Episode] = field(default_factory=list)
    fallbacks: dict = field(default_factory=dict)  # player -> why it has no programmatic answer

    def status(self, name: str) -> str | None:
        return next((r.status for r in self.results if r.name == name + self.suffix), None)

    def run(self, name: str, needs: tuple[str, ...] = ()) -> None:
        blocked = [n for n in needs if self.status(n) not in (PASS, WARN)]
        status, message = SKIP, f"not run: {', '.join(blocked)} did not pass"
        if not blocked:
            try:
                status, message = getattr(self, "check_" + name)()
            except _Failed as e:
                status, message = FAIL, str(e)
            except Exception as e:  # noqa: BLE001 - game code: say where, never a traceback
                status, message = FAIL, describe_error(e, self.folder)
        self.results.append(CheckResult(name + self.suffix, status, message))

    def _game_spec(self):
        return clemgame().GameSpec.from_dict(dict(self.spec, game_path=str(self.folder)))

    def check_instances_file(self) -> tuple[str, str]:
        path = self.folder / "in" / f"{self.spec.get('instances', 'instances')}.json"
        if not path.is_file():
            found = ", ".join(sorted(p.stem for p in (self.folder / "in").glob("*.json"))) or "none"
            raise _Failed(f"{_show(path)}: missing (files in in/: {found}); expected the file named by "
                          f"'instances' in clemgame.json (default 'instances')")
        data = _read_json(path)
        experiments = data.get("experiments") if isinstance(data, dict) else None
        if not isinstance(experiments, list) or not experiments:
            raise _Failed(f"{_show(path)}: expected an object with a non-empty list 'experiments'")
        if problems := [p for i, e in enumerate(experiments) for p in _experiment_problems(i, e)]:
            raise _Failed(f"{_show(path)}: {'; '.join(problems)}")
        self.rows = game_instance_rows(self._game_spec())
        return PASS, f"{_show(path)}: {len(experiments)} experiment(s), {len(self.rows)} instance(s)"

    def check_master_import(self) -> tuple[str, str]:
        master = self.folder / "master.py"
        if not master.is_file():
            raise _Failed(f"{_show(master)}: missing; expected a master.py with one GameBenchmark subclass")
        saved_path, saved_modules = list(sys.path), set(sys.modules)
        try:
            self.benchmark = load_benchmark(self._game_spec())
        except Exception as e:  # noqa: BLE001 - reported with its file and line
            sys.path[:] = saved_path  # clemcore leaves the game folder on sys.path, its helpers loaded
            for name in set(sys.modules) - saved_modules:
                if _inside(getattr(sys.modules[name], "__file__", None) or "", self.folder):
                    del sys.modules[name]
            root = e.__cause__ or e
            hint = (f"; expected module '{root.name}' installed (or in the game folder)"
                    if isinstance(root, ModuleNotFoundError) and root.name else "")
            raise _Failed(describe_error(e, self.folder) + hint) from None
        return PASS, f"{_show(master)}: {type(self.benchmark).__name__} loaded"

    def check_player_slots(self) -> tuple[str, str]:
        declared, master = int(self.spec["players"]), _show(self.folder / "master.py")
        slots, own = probe_roles(self.benchmark, self.rows[0])
        used = {s.index for s in slots}
        text = "; ".join([f"slot {s.index} -> {s.player_name} ({s.role})" for s in slots]
                         + [f"slot {i} unused" for i in range(declared) if i not in used]
                         + [f"the game creates {name} ({role}) itself" for name, role in own])
        if not slots:
            raise _Failed(f"{master}: builds no player from player_models ({text}); expected {declared} "
                          f"model-backed player(s) ('players' in clemgame.json)")
        if len(used) < declared:
            return WARN, (f"{master}: builds {len(used)} model-backed player(s), clemgame.json declares "
                          f"{declared}: {text}")
        return PASS, f"{declared} model-backed player(s): {text}"

    def check_programmatic_players(self) -> tuple[str, str]:
        if self.fallbacks:
            return WARN, (f"{_show(self.folder / 'master.py')}: no programmatic player: "
                          f"{'; '.join(f'{who} {why}' for who, why in self.fallbacks.items())}; "
                          f"episodes were answered with the fixed text {FALLBACK_RESPONSE!r}")
        return PASS, "every player answers programmatically (_custom_response)"

    def _answer(self, player: Any, context: dict) -> str:
        """The player's programmatic answer, else FALLBACK_RESPONSE (and why, in fallbacks)."""
        try:
            text = player._custom_response(context)
        except NotImplementedError as e:
            text = e
        if isinstance(text, str):
            return text
        self.fallbacks[f"{player.name} ({player.game_role}, class {type(player).__name__})"] = \
            f"_custom_response gave {type(text).__name__}, expected a str"
        return FALLBACK_RESPONSE

    def play_episodes(self) -> None:
        experiments = itertools.groupby(self.rows, key=lambda r: r["experiment"]["name"])
        spread = [r for rows in itertools.zip_longest(*(list(g) for _, g in experiments)) for r in rows if r]
        for row in spread[:self.num_episodes]:  # the experiments in turn
            label = f"experiment '{row['experiment']['name']}' game_id {row['game_instance']['game_id']}"
            episode = _Episode(row, label)
            self.episodes.append(episode)
            try:
                episode.env = self._new_env()
                self._reset(episode.env, row)
                self._advance(episode, episode.env, self.max_steps)
            except Exception as e:  # noqa: BLE001 - judged by the episode checks
                episode.error = e  # scoring runs inside the last step: tell it by clemcore's scorer API
                episode.in_scorer = any(frame.f_code.co_name in ("create_game_scorer", "compute_scores")
                                        for frame, _ in traceback.walk_tb(e.__traceback__))
                episode.steps += episode.in_scorer  # the last step ended the game

    def _new_env(self, player_models: list | None = None):
        backends = clemcore().backends
        models = player_models or [backends.CustomResponseModel(backends.ModelSpec(model_name="programmatic"))
                                   for _ in range(int(self.spec["players"]))]
        return GameEnv(self.benchmark, models, max_turns=0)  # endless episodes are found here, not cut short

    def _reset(self, env: Any, row: dict) -> None:
        """Reset ``env`` to ``row`` with ``random`` (and numpy's, once imported) seeded by the
        seed and the instance: programmatic players that draw at random give the same verdict
        on every run, and a replayed episode (the fork check) is the same episode."""
        import random
        key = f"{self.seed}/{row['experiment']['name']}/{row['game_instance']['game_id']}"
        random.seed(key)
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed(random.Random(key).getrandbits(32))
        env.reset(row["experiment"], row["game_instance"])

    def _advance(self, episode: _Episode, env: Any, num_steps: int,
                 answer: Callable[[Any, dict], str] | None = None) -> Any:
        """Play up to ``num_steps`` steps: the final StepResult, or None if not done."""
        answer = answer or self._answer
        for _ in range(num_steps):
            gm = env.game_master
            context = gm.get_context_for(gm.current_player)
            if not (isinstance(context, dict) and isinstance(context.get("role"), str)
                    and isinstance(context.get("content"), str)):
                episode.bad_context = (f"step {episode.steps}: the context for {gm.current_player.name} is "
                                       f"{context!r:.80}; expected a dict with 'role' and 'content' (str)")
                return None
            player, context = env.perceive()
            result = env.step(answer(player, context))
            episode.steps += 1
            if result.done:
                episode.result = result
                return result
        return None

    def _problems(self, describe: Callable[[_Episode], str], episodes: list | None = None) -> str:
        """``"<episodes>: <problem>"`` for each distinct problem, joined by "; "."""
        by_text: dict[str, list[str]] = {}
        for episode in self.episodes if episodes is None else episodes:
            if text := describe(episode):
                by_text.setdefault(text, []).append(episode.label)
        return "; ".join(f"{' and '.join(labels)}: {text}" for text, labels in by_text.items())

    def check_episode_contexts(self) -> tuple[str, str]:
        if problems := self._problems(lambda e: e.bad_context):
            raise _Failed(f"{_show(self.folder / 'master.py')}: {problems}")
        return PASS, f"every turn of {len(self.episodes)} episode(s) had a context with 'role' and 'content'"

    def check_episode_ends(self) -> tuple[str, str]:
        def problem(e: _Episode) -> str:
            if e.error is not None and not e.in_scorer:
                return f"step {e.steps}: {describe_error(e.error, self.folder)}"
            if e.result is None and e.error is None and not e.bad_context:
                return (f"did not end within {self.max_steps} steps; expected the master to end the game "
                        f"(self.state.succeed()/failed()/abort(), or legacy _does_game_proceed() -> False)")
            return ""
        if problems := self._problems(problem):
            raise _Failed(f"{_show(self.folder)}: {problems}")
        steps = ", ".join(str(e.steps) for e in self.episodes)
        return PASS, f"{len(self.episodes)} episode(s) ended after {steps} step(s)"

    def check_episode_scores(self) -> tuple[str, str]:
        scored = [e for e in self.episodes if e.result is not None or e.in_scorer]
        if not scored:
            return SKIP, "not run: no episode ended"

        def problem(e: _Episode) -> str:
            if e.in_scorer:
                unlogged = [k for k in REQUIRED_SCORES[:3] if k not in e.env.interactions]
                return f"scoring raised {describe_error(e.error, self.folder)}" + (
                    f"; the master never logged {', '.join(unlogged)} (self.log_key(name, 0 or 1), "
                    f"e.g. in _on_after_game)" if unlogged else "")
            missing = [k for k in REQUIRED_SCORES if k not in e.result.episode_scores]
            return (f"the scorer did not log {', '.join(repr(k) for k in missing)}; expected the episode scores "
                    f"{', '.join(REQUIRED_SCORES)} (log_episode_score)" if missing else "")
        if problems := self._problems(problem, scored):
            row = scored[0].row
            scorer = type(self.benchmark.create_game_scorer(row["experiment"], row["game_instance"]))
            code = next((getattr(cls, n).__code__ for cls in scorer.__mro__ for n in ("compute_episode_scores",
                         "log_main_score") if n in vars(cls)), None)  # the scorer's own method, if any
            where = f"{_show(code.co_filename)}:{code.co_firstlineno}" if code else _show(self.folder / "master.py")
            raise _Failed(f"{where} ({scorer.__name__}): {problems}")
        return PASS, f"{len(scored)} episode(s) scored with {', '.join(REQUIRED_SCORES)}"

    def check_episode_outcome(self) -> tuple[str, str]:
        finished = [e for e in self.episodes if e.result is not None]
        if not finished:
            return SKIP, "not run: no episode was scored"
        if problems := self._problems(lambda e: "" if e.result.outcome in OUTCOMES else
                                      f"outcome {e.result.outcome!r}, expected one of {', '.join(OUTCOMES)}"):
            raise _Failed(f"{_show(self.folder)}: {problems}")
        outcomes = ", ".join(e.result.outcome for e in finished)
        def unclear(e: _Episode) -> str:
            num_set = sum(flag(e.result.episode_scores.get(k)) for k in REQUIRED_SCORES[:3])
            return "" if num_set == 1 else "not exactly one of Aborted/Success/Lose set"
        if unclear := self._problems(unclear, finished):
            return WARN, f"{_show(self.folder)}: {unclear} (outcomes read as: {outcomes})"
        return PASS, f"outcomes: {outcomes}"

    def check_fork(self) -> tuple[str, str]:
        played = next((e for e in self.episodes if e.result is not None), None)
        if played is None:
            return SKIP, "not run: no episode ended and was scored"
        at, where = played.steps // 2, f"{_show(self.folder)}: {played.label}"
        original, env = _Episode(played.row, played.label), self._new_env()
        self._reset(env, played.row)
        if self._advance(original, env, at) is not None:
            return SKIP, f"{where}: replayed, the episode ended before step {at}"
        try:
            clone = env.fork()
        except Exception as e:  # noqa: BLE001 - any deep-copy failure
            return WARN, (f"{_show(self.folder / 'master.py')}: the game state cannot be deep-copied "
                          f"({_uncopyable_attribute(env)}{type(e).__name__}: {e}); GameEnv.fork, branching and "
                          f"DPO from branches will not work with this game")
        before, forked = json.dumps(env.interactions, default=str), _Episode(played.row, played.label, steps=at)
        if self._advance(forked, clone, self.max_steps) is None:
            raise _Failed(f"{where}: the fork made after step {at} did not end within {self.max_steps} steps")
        if json.dumps(env.interactions, default=str) != before:
            raise _Failed(f"{where}: playing the fork changed the original's interactions; expected a deep copy")
        if self._advance(original, env, self.max_steps) is None:
            raise _Failed(f"{where}: after forking at step {at}, the original did not end")
        return PASS, (f"forked after step {at} of {played.steps}; fork and original ended "
                      f"({forked.result.outcome}, {original.result.outcome})")

    def check_interactions_log(self) -> tuple[str, str]:
        logged = [e for e in self.episodes if e.env is not None and e.env.episode_log().interactions is not None]
        if not logged:
            return SKIP, "not run: no episode started"
        if problems := self._problems(lambda e: _interactions_problem(e.env.episode_log().interactions), logged):
            raise _Failed(f"{_show(self.folder)}: interactions log: {problems}")
        num_events = sum(len(t) for e in logged for t in e.env.interactions["turns"])
        return PASS, f"{len(logged)} interactions log(s), {num_events} event(s), well formed"

    def check_model_players(self) -> tuple[str, str]:
        """One episode whose model-backed players answer in no format (their side calls too);
        the players the game builds itself answer programmatically."""
        backends = clemcore().backends

        class StandIn(backends.Model):
            def generate_response(self, messages):
                return {"messages": messages}, {"response": STAND_IN_RESPONSE}, STAND_IN_RESPONSE

        row = self.rows[0]
        label = f"experiment '{row['experiment']['name']}' game_id {row['game_instance']['game_id']}"
        models = [StandIn(backends.ModelSpec(model_name=f"stand-in-{i}")) for i in range(int(self.spec["players"]))]
        env, episode = self._new_env(models), _Episode(row, label)
        self._reset(env, row)

        def answer(player: Any, context: dict) -> str:
            return STAND_IN_RESPONSE if any(player.model is m for m in models) else self._answer(player, context)
        try:
            result = self._advance(episode, env, self.max_steps, answer)
        except Exception as e:  # noqa: BLE001 - game code failing on a reply a model may give
            raise _Failed(f"{label}, every model player replying {STAND_IN_RESPONSE!r}: step {episode.steps}: "
                          f"{describe_error(e, self.folder)}; expected the game to handle any reply") from None
        if result is None:
            return WARN, (f"{_show(self.folder)}: {label} did not end within {self.max_steps} steps when every "
                          f"model player replies in no format ({STAND_IN_RESPONSE!r}): a model that never finds the "
                          f"format plays until the turn limit (--max-turns) ends the episode as aborted; expected "
                          f"the master to end the game after repeated format errors")
        return PASS, (f"{label} ended ({result.outcome}) after {episode.steps} step(s) with every model player "
                      f"replying in no format")


def _experiment_problems(index: int, experiment: Any):
    experiment = experiment if isinstance(experiment, dict) else {}
    name, instances = experiment.get("name"), experiment.get("game_instances")
    where = f"experiment {name!r}" if isinstance(name, str) and name else f"experiment {index}"
    if not (isinstance(name, str) and name):
        yield f"{where} has no 'name'"
    if not isinstance(instances, list) or not instances:
        yield f"{where} has no non-empty 'game_instances' list"
        return
    ids = [inst.get("game_id") if isinstance(inst, dict) else None for inst in instances]
    yield from (f"{where} instance {j}: 'game_id' is {g!r}, expected an int"
                for j, g in enumerate(ids) if type(g) is not int)
    if duplicates := sorted({g for g in ids if type(g) is int and ids.count(g) > 1}):
        yield f"{where}: duplicate game_id {', '.join(map(str, duplicates))}"


def _interactions_problem(interactions: dict) -> str:
    """What is wrong with an interactions log ("" if nothing)."""
    try:
        json.dumps(interactions)
    except (TypeError, ValueError) as e:
        return f"not JSON-serialisable ({e})"
    turns = interactions.get("turns")
    if not isinstance(interactions.get("players"), dict):
        return "'players' is missing or not a dict"
    if not isinstance(turns, list) or not all(isinstance(t, list) for t in turns):
        return "'turns' is missing or not a list of lists"
    for i, j, event in ((i, j, ev) for i, turn in enumerate(turns) for j, ev in enumerate(turn)):
        if not (isinstance(event, dict) and "from" in event and "to" in event
                and isinstance(event.get("action"), dict) and "type" in event["action"]):
            return f"turn {i} event {j} is {event!r:.80}; expected a dict with 'from', 'to' and 'action.type'"
    return ""


def _uncopyable_attribute(env: Any) -> str:
    """``"Class.attribute is a type: "`` for the first attribute of the players or the master
    that cannot be deep-copied (models and recorders are not copied by GameEnv.fork)."""
    gm, skip = env.game_master, ("_model", "_loggers", "player_models", "players_by_names")
    for owner, key, value in ((o, k, v) for o in (*gm.get_players(), gm) for k, v in vars(o).items() if k not in skip):
        try:
            copy.deepcopy(value, {id(m): m for m in env.player_models})
        except Exception:  # noqa: BLE001 - any deep-copy failure
            return f"{type(owner).__name__}.{key} is a {type(value).__name__}: "
    return ""


def _check_spec_file(name_or_path: Any) -> tuple[CheckResult, Path, list[dict]]:
    """Check clemgame_json; the game folder and the specs to check further."""
    folder, wanted = Path(name_or_path).resolve(), None
    try:
        if not folder.is_dir() and len(Path(name_or_path).parts) == 1:  # a game name
            entry = resolve_game(str(name_or_path))
            folder, wanted = Path(entry.path).resolve(), entry.name
        data = _read_json(folder / "clemgame.json")
    except (_Failed, PlaypenError) as e:  # PlaypenError: unknown name, or a malformed registry on the way
        return CheckResult("clemgame_json", FAIL, str(e)), folder, []
    specs, problems, warnings, valid = data if isinstance(data, list) else [data], [], [], []
    for i, spec in enumerate(specs):
        where, spec = f"spec {i}: " if isinstance(data, list) else "", spec if isinstance(spec, dict) else {}
        bad = []
        if not isinstance(spec.get("game_name"), str) or not spec["game_name"]:
            bad.append(f"{where}'game_name' is {spec.get('game_name')!r}, expected a non-empty string")
        if type(spec.get("players")) is not int or spec["players"] < 1:
            bad.append(f"{where}'players' is {spec.get('players')!r}, expected an int >= 1")
        if not isinstance(spec.get("instances", "instances"), str):
            bad.append(f"{where}'instances' is {spec['instances']!r}, expected a file stem in in/")
        if "description" not in spec:
            warnings.append(f"{where}no 'description' (`clem list games` crashes without it)")
        problems += bad
        if not bad and wanted in (None, spec["game_name"]):
            valid.append(spec)
    if wanted is not None and not valid and not problems:
        problems.append(f"no spec named '{wanted}'")
    status = FAIL if problems else WARN if warnings else PASS
    text = "; ".join(problems + warnings) or f"{len(valid)} game spec(s): {', '.join(s['game_name'] for s in valid)}"
    return CheckResult("clemgame_json", status, f"{_show(folder / 'clemgame.json')}: {text}"), folder, valid


def check_game(name_or_path: Any, *, instances: str | None = None, max_steps: int = 200,
               num_episodes: int = 2, seed: int = 0) -> CheckReport:
    """Check a game — a registered name (``playpen.registry.resolve_game``) or a folder
    with ``clemgame.json`` (every spec in it) — against what playpen needs.

    ``instances`` overrides the instances file stem; an episode still running after
    ``max_steps`` steps counts as endless; ``num_episodes`` are played (experiments in turn);
    ``seed`` seeds ``random`` before each episode (the same verdicts on every run).
    """
    spec_result, folder, specs = _check_spec_file(name_or_path)
    results = [spec_result]
    for spec in specs:
        checker = _GameChecker(dict(spec, instances=instances) if instances else spec, folder,
                               f"[{spec['game_name']}]" if len(specs) > 1 else "", max_steps, num_episodes, seed)
        try:
            checker.run("instances_file")
            checker.run("master_import")
            checker.run("player_slots", needs=("instances_file", "master_import"))
            if checker.status("player_slots") in (PASS, WARN):
                checker.play_episodes()
            for name in CHECKS[4:]:  # these need played episodes
                checker.run(name, needs=("player_slots",) + ("episode_ends", "episode_scores") * (name == "model_players"))
        finally:
            if checker.benchmark is not None:
                checker.benchmark.close()
        results += checker.results
    if not specs:
        results += [CheckResult(name, SKIP, "not run: clemgame_json did not pass") for name in CHECKS[1:]]
    return CheckReport(str(name_or_path), tuple(results))


def main(argv: list[str] | None = None) -> int:
    """Print :func:`check_game`'s report; the exit status: 0 when no check failed, else 1."""
    import argparse
    parser = argparse.ArgumentParser(prog="python -m playpen.envs.check", description="Check a clemcore game.")
    parser.add_argument("game", help="a registered game name or a game folder (with clemgame.json)")
    parser.add_argument("--instances", help="instances file stem in the game's in/ folder")
    parser.add_argument("--max-steps", type=int, default=200, help="an episode longer than this is endless")
    parser.add_argument("--num-episodes", type=int, default=2, help="episodes to play (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="seed of `random` before each episode (default 0)")
    args = parser.parse_args(argv)
    report = check_game(args.game, instances=args.instances, max_steps=args.max_steps, num_episodes=args.num_episodes,
                        seed=args.seed)
    print("\n".join(report.lines()))
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
