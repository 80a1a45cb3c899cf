"""What the benchmark scripts share; every script imports this module, none imports another script.

- paths: the repository, ``benchmarks/results`` and the shared SFT warm-up adapter of ``learning.py``;
- :class:`Setting`: one held-out evaluation (a game, the learner's role, its partner);
- the fingerprint cache: :func:`fingerprint` (options and code -> a key) and
  :func:`cached_result` (a result file, when its key still matches);
- a trainer's run folder, its final adapter, the referencegame follower's answers, a time limit;
- child processes: ``python -m playpen ...`` teed to a log (:func:`run_playpen`), one packaged
  trainer's short run read back from its log (:func:`run_trainer`), the working folder they
  run in (:func:`workspace`) and the machine's facts written beside every result (:func:`machine`);
- ``recall``, the scripted multi-turn game of the rollout benchmarks (:func:`write_recall_game`);
- arith_solver, the task of the reference comparisons (``grpo_reference.py``, ``dpo_reference.py``):
  its prompt and outcome reward, training and held-out problems, the 16-step SFT start, greedy
  accuracy per problem, the two one-sided tests (:func:`start_adapter`, :func:`correct`, :func:`tost_p`).

A script is run as ``python benchmarks/<script>.py``: its folder is on ``sys.path``, so
``from harness import ...`` finds this file. Importing it loads no model (torch, playpen's
trainers and clemcore are imported inside the functions that need them), so ``--help`` stays fast.
"""
from __future__ import annotations

import hashlib
import importlib
import json
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO_ROOT / "benchmarks"
RESULTS = BENCHMARKS / "results"
# learning.py's shared SFT warm-up (its 8 steps): the start of the population and shared-prompt runs
SFT_ADAPTER = RESULTS / "learning" / "models" / "sft" / "sft+lora" / "smol-135m" / "checkpoint-8"


@dataclass(frozen=True)
class Setting:
    """One held-out evaluation: a game, the learner's role and the partner (None: self-play)."""

    name: str
    game: str
    learner_slot: int = 0
    partner: str | None = None

    def players(self, learner, partner_model):
        if partner_model is None:
            return [learner]
        return [learner, partner_model] if self.learner_slot == 0 else [partner_model, learner]


# ----------------------------------------------------------------------------- the fingerprint cache

def fingerprint(parts, modules=()) -> str:
    """A result's key: ``parts`` (JSON: options, protocol; other values as their text) and the
    source of ``modules`` (dotted names; a moved module's old name counts with its new file)."""
    digest = hashlib.sha256()
    digest.update(json.dumps(parts, sort_keys=True, default=str).encode())  # a Path: its text
    for name in modules:
        file = Path(importlib.import_module(name).__file__)
        digest.update(name.encode() + file.read_bytes())
    return digest.hexdigest()[:16]


def cached_result(path: Path, key: str) -> dict | None:
    """The result cached at ``path`` when it was made with ``key``; else None (re-run it)."""
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    return data if data.get("fingerprint") == key else None


# ----------------------------------------------------------------------------- runs and adapters

def run_dir_of(models_dir: Path) -> Path | None:
    """The trainer's run folder below ``models_dir``: the one holding its JSON log."""
    from playpen.training.common.plotting import LOG_FILE
    logs = sorted(models_dir.rglob(LOG_FILE), key=lambda p: p.stat().st_mtime)
    return logs[-1].parent if logs else None


def final_adapter(run_dir: Path | None) -> Path | None:
    """The adapter a run ended with: its ``playpen-run.json``'s checkpoint (every trainer
    writes one), else its newest ``checkpoint-N``."""
    from playpen.training.common.checkpoints import latest_checkpoint
    if run_dir is None:
        return None
    summary = run_dir / "playpen-run.json"
    if summary.exists():
        checkpoint = json.loads(summary.read_text()).get("checkpoint")
        if checkpoint and (Path(checkpoint) / "adapter_config.json").exists():
            return Path(checkpoint)
    found = [latest_checkpoint(d) for d in [run_dir, *run_dir.rglob("*")] if d.is_dir()]
    found = [f for f in found if f is not None]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def answer_distribution(run_dir: Path) -> dict:
    """How often the referencegame follower gave each answer (from the episodes' records)."""
    counts = Counter()
    for path in Path(run_dir).rglob("interactions.json"):
        if "referencegame" not in path.parts:
            continue
        try:
            answer = json.loads(path.read_text()).get("answer")
        except (OSError, json.JSONDecodeError):
            continue
        counts[str(answer) if answer not in (None, "") else "(none)"] += 1
    return dict(counts.most_common())


def stop_after(seconds: float):
    """A playpen callback that stops training after `seconds` (the trainer saves a checkpoint)."""
    from playpen.callbacks import BaseCallback

    class StopAfter(BaseCallback):
        def _on_learn_start(self, trainer_name, total_steps):
            self.started = time.time()

        def _on_train_step(self, step, metrics):
            return time.time() - self.started < seconds
    return StopAfter()


def snapshots(run: Path) -> list[str]:
    """The snapshots of a population run (``playpen run fsp``), oldest first."""
    players = json.loads((run / "population" / "population.json").read_text())["players"]
    return [p["name"] for p in players]


# ----------------------------------------------------------------------------- child processes

def run_playpen(args: list[str], log: Path) -> float:
    """``python -m playpen ARGS`` (its output teed to ``log``); the wall seconds. Fails loudly."""
    started = time.time()
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.Popen([sys.executable, "-m", "playpen", *args], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:
            out.write(line)
            out.flush()
            if not line.startswith(("\r", " ")) and "it/s" not in line and "s/it" not in line:
                print("   ", line.rstrip()[:200], flush=True)
        code = proc.wait()
    if code != 0:
        raise SystemExit(f"{Path(sys.argv[0]).name}: playpen {' '.join(args[:2])} failed ({code}); see {log}")
    return time.time() - started


def workspace(root: Path, learner: str) -> Path:
    """A working directory whose registries name playpen's games and the learner (its
    folder made absolute)."""
    entries = json.loads((REPO_ROOT / "model_registry.json").read_text())
    for entry in entries:
        hf_id = entry.get("huggingface_id", "")
        if hf_id and not Path(hf_id).is_absolute() and (REPO_ROOT / hf_id).exists():
            entry["huggingface_id"] = str(REPO_ROOT / hf_id)
    if not any(e["model_name"] == learner for e in entries):
        raise SystemExit(f"{Path(sys.argv[0]).name}: no model '{learner}' in {REPO_ROOT / 'model_registry.json'}")
    (root / "model_registry.json").write_text(json.dumps(entries))
    (root / "game_registry.json").write_text(json.dumps([{"benchmark_path": str(REPO_ROOT / "playpen" / "games")}]))
    return root


def machine() -> dict:
    """The machine's facts, kept beside every timing."""
    import platform
    import torch
    return {"cpus": os.cpu_count(), "torch": torch.__version__, "python": platform.python_version(),
            "threads": torch.get_num_threads(), "load_average": os.getloadavg()}


# trainer -> (packaged trainer, options of the run; {L} = turn budget, {pairs} = SPIN's pairs): the short
# runs of memory.py (and shared_prompts.py's GRPO variants)
RUNS = {
    "sft": ("sft", "--demo-max-instances 4"),
    "spin": ("spin", "-L {L} --rounds 1 --pairs-per-round 16 --demo-max-instances 4"),
    "dpo": ("dpo", "--source pairs --pairs-file {pairs}"),
    "grpo": ("grpo-teacher", "-t programmatic --roles 'Instruction Follower' -T 1.0 -L {L} "
                             "--num-generations 8 --groups-per-step 2 --beta 0 --learning-rate 2e-4"),
}
RUN_FOLDERS = {"sft": "sft+lora/smol-135m", "spin": "spin+lora/smol-135m", "dpo": "dpo+lora/smol-135m/pairs",
               "grpo": "grpo+lora/smol-135m/programmatic"}
COMPARE_FILE = "compare.jsonl"  # memory.py --compare: GRPO's step time vs a plain forward + backward, per step


def run_trainer(name: str, args, root: Path) -> dict:
    """One trainer's run (:data:`RUNS`) in a child process in ``root``; its per-step numbers from
    the run's log. ``args``: learner, turn_tokens, steps (GRPO), other_steps, extra (trainer ->
    more options), compare (GRPO in memory.py's measuring child)."""
    trainer, options = RUNS[name]
    options = options.format(L=args.turn_tokens, pairs=root / "models" / RUN_FOLDERS["spin"] / "pairs-round-1.jsonl")
    steps = args.steps if name == "grpo" else args.other_steps
    playpen = Path(sys.executable).parent / "playpen"  # the CLI of this interpreter's environment
    command = (f"{playpen if playpen.exists() else 'playpen'} run {trainer} -l {args.learner} --games referencegame --max-steps {steps} "
               f"--save-steps {steps} --no-evaluate --overwrite {options} {args.extra.get(name, '')}")
    if name == "grpo" and args.compare:
        command = f"{sys.executable} {BENCHMARKS / 'memory.py'} --child-compare -- " + command.split(" ", 1)[1]
    print(f"[memory] {name}: {command}", flush=True)
    started = time.time()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    done = subprocess.run(command, shell=True, cwd=root, env=env, capture_output=True, text=True)
    seconds = time.time() - started
    run_dir = root / "models" / RUN_FOLDERS[name]
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
        return {"trainer": name, "command": command, "error": done.returncode, "seconds": round(seconds, 1)}
    from playpen.training.common.plotting import read_log
    steps_log = read_log(run_dir)
    result = {"trainer": name, "command": command, "seconds": round(seconds, 1), "steps": [
        {k: v for k, v in s.items() if k in ("step", "time") or k.startswith(("memory/", "time/", "train/num_tokens",
                                                                             "train/shared_prompt_rows"))}
        for s in steps_log]}
    compare = run_dir / COMPARE_FILE
    if compare.exists():
        result["compare"] = [json.loads(line) for line in compare.read_text().splitlines() if line.strip()]
    return summarise(result)


def summarise(result: dict) -> dict:
    """A run's peak memory (first, last step, growth from the first half to the second) and its
    median step time over rollout + forward + backward (``--compare``)."""
    peaks = [s["memory/peak_rss_mb"] for s in result["steps"] if "memory/peak_rss_mb" in s]
    if peaks:
        half = max(1, len(peaks) // 2)
        first, second = max(peaks[:half]), max(peaks[half:] or peaks[:half])
        result.update(num_steps=len(peaks), peak_rss_mb=max(peaks), first_step_peak_mb=peaks[0],
                      last_step_peak_mb=peaks[-1], growth_percent=round(100 * (second / first - 1), 1))
    if result.get("compare"):
        ratios = [c["ratio"] for c in result["compare"]]
        result["step_over_rollout_plus_fwd_bwd"] = round(sorted(ratios)[len(ratios) // 2], 2)
    return result


# ----------------------------------------------------------------------------- the multi-turn benchmark game

MULTI_TURN_GAME = "recall"
RECALL_SPEC = {"game_name": "recall", "description": "Benchmark: name words related to a topic, one per round.",
               "main_game": "recall", "players": 1, "image": "none", "languages": ["en"], "benchmark": [],
               "roles": ["Namer"]}
RECALL_TOPICS = ["the sea", "winter", "music", "a kitchen", "trees", "a city", "sports", "the sky", "school",
                 "a farm", "travel", "books", "the body", "weather", "tools", "colours", "animals", "a garden",
                 "money", "a hospital", "the night", "clothes", "a river", "games", "fire", "a house", "food",
                 "birds", "work", "the desert", "light", "time"]
RECALL_MASTER = '''"""recall (written by playpen's benchmarks/harness.py): each round the Namer names one word
related to a topic. Every reply continues the episode, so it lasts exactly `rounds` turns."""
import math

from clemcore.clemgame import DialogueGameMaster, GameBenchmark, GameScorer, Player
from clemcore.clemgame.metrics import BENCH_SCORE, METRIC_ABORTED, METRIC_LOSE, METRIC_SUCCESS

PROMPT = ("We play {rounds} rounds of a word game about {topic}. In each round, name one word related "
          "to {topic} that you have not named before. Reply with exactly one line: WORD: <word>")
NEXT = "Round {round} of {rounds}: name another word related to {topic}. Reply with: WORD: <word>"


class Namer(Player):
    def __init__(self, model):
        super().__init__(model, game_role="Namer")

    def _custom_response(self, context):
        return "WORD: something"


class RecallMaster(DialogueGameMaster):
    def _on_setup(self, **instance):
        self.topic, self.rounds = instance["topic"], int(self.experiment["rounds"])
        self.namer = Namer(self.player_models[0])
        self.add_player(self.namer, initial_context=PROMPT.format(rounds=self.rounds, topic=self.topic))
        self.answers, self.words = 0, []

    def _parse_response(self, player, response):
        return response.strip()

    def _advance_game(self, player, parsed_response):
        self.answers += 1
        head, _, word = parsed_response.partition(":")
        word = word.strip().lower()
        if head.strip().upper() == "WORD" and word and word not in self.words:
            self.words.append(word)
        if self.answers >= self.rounds:
            if len(self.words) == self.rounds:
                self.state.succeed()
            else:
                self.state.failed()
        else:
            self.set_context_for(self.namer, NEXT.format(round=self.answers + 1, rounds=self.rounds,
                                                         topic=self.topic))

    def _on_after_game(self):
        outcome = self.state.outcome.value
        self.log_key(METRIC_ABORTED, int(outcome == "aborted"))
        self.log_key(METRIC_SUCCESS, int(outcome == "success"))
        self.log_key(METRIC_LOSE, int(outcome == "failure"))
        self.log_key("words", len(self.words))
        self.log_key("rounds", self.rounds)


class RecallScorer(GameScorer):
    def compute_round_score(self, round_idx, round_events):
        pass

    def compute_episode_scores(self, interactions):
        if interactions[METRIC_ABORTED]:
            self.log_episode_score(BENCH_SCORE, math.nan)
        else:
            self.log_episode_score(BENCH_SCORE, 100 * interactions["words"] / interactions["rounds"])


class RecallBenchmark(GameBenchmark):
    def create_game_master(self, experiment, player_models):
        return RecallMaster(self.game_spec, experiment, player_models)

    def create_game_scorer(self, experiment, game_instance):
        return RecallScorer(self.game_name, experiment, game_instance)
'''


def write_recall_game(folder: Path, num_instances: int, rounds: int) -> Path:
    """The multi-turn benchmark game (clemcore's new API) in ``folder/recall``: one instance
    per topic, every episode ``rounds`` learner turns."""
    game = folder / MULTI_TURN_GAME
    (game / "in").mkdir(parents=True)
    (game / "clemgame.json").write_text(json.dumps(RECALL_SPEC, indent=2))
    (game / "master.py").write_text(RECALL_MASTER)
    topics = [RECALL_TOPICS[i % len(RECALL_TOPICS)] + ("" if i < len(RECALL_TOPICS) else f" ({i})")
              for i in range(num_instances)]
    instances = {"experiments": [{"name": f"{rounds}_rounds", "rounds": rounds, "game_instances": [
        {"game_id": i, "topic": topic} for i, topic in enumerate(topics)]}]}
    (game / "in" / "instances.json").write_text(json.dumps(instances, indent=2))
    return game


# ----------------------------------------------------------------------------- arith_solver: the reference comparisons' task

ARITH_GAME = REPO_ROOT / "playpen" / "games" / "builtin" / "proposer_solver"
ARITH_TRAIN = "instances_solver_train"
ARITH_EVAL_SEED = 20261128  # held-out problems: a seed no instances file was generated with
ARITH_MAX_TOKENS = 16


def _arith_game_on_path() -> None:
    """The game's own modules (its rules, parser and generator) import from its folder."""
    if str(ARITH_GAME) not in sys.path:
        sys.path.insert(0, str(ARITH_GAME))


def solver_prompt(problem: str) -> str:
    from string import Template
    _arith_game_on_path()
    from arith_rules import parse_expression, render
    text = (ARITH_GAME / "resources" / "solver_prompt.template").read_text()
    return Template(text).substitute(problem=render(parse_expression(problem))).strip()


def reward_of(reply: str, problem: str) -> float:
    """The game's outcome reward: 1 for the right value, 0 for a wrong one, -1 unparsable."""
    _arith_game_on_path()
    from arith_rules import evaluate, parse_answer, parse_expression
    from clemcore.clemgame.errors import ParseError
    try:
        given = parse_answer(reply)
    except ParseError:  # the game aborts the episode
        return -1.0
    return 1.0 if given == evaluate(parse_expression(problem)) else 0.0


def held_out_problems(count: int) -> list[str]:
    import random
    _arith_game_on_path()
    from instancegenerator import random_problem
    rng = random.Random(ARITH_EVAL_SEED)
    return [random_problem(rng, 1 + i % 4) for i in range(count)]


def train_problems() -> list[str]:
    data = json.loads((ARITH_GAME / "in" / f"{ARITH_TRAIN}.json").read_text())
    return [i["problem"] for e in data["experiments"] for i in e["game_instances"]]


def correct(learner: str, adapter: Path, problems: list[str], cache: Path | None = None) -> list[int]:
    """Greedy right (1) or not (0) per problem for learner + adapter, transformers' generate, batches of 32;
    with `cache`, read from that file when it holds the same learner, adapter and problems, else written to it
    (an interrupted benchmark does not evaluate a checkpoint twice)."""
    key = {"learner": learner, "adapter": str(adapter), "problems": problems}
    if cache is not None and cache.exists():
        held = json.loads(cache.read_text(encoding="utf-8"))
        if held.get("key") == key:
            return held["correct"]
    right = _correct(learner, adapter, problems)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps({"key": key, "correct": right}), encoding="utf-8")
    return right


def _correct(learner: str, adapter: Path, problems: list[str]) -> list[int]:
    import torch
    from playpen.models import load_model_by_name
    model = load_model_by_name(learner, gen_args=dict(temperature=0.0, max_tokens=ARITH_MAX_TOKENS),
                               role="learner", adapter=adapter)
    hf, tokenizer = model.model, model.tokenizer
    tokenizer.padding_side = "left"
    right = []
    for start in range(0, len(problems), 32):
        batch = problems[start:start + 32]
        texts = [tokenizer.apply_chat_template([{"role": "user", "content": solver_prompt(p)}],
                                               add_generation_prompt=True, tokenize=False) for p in batch]
        enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            out = hf.generate(**enc, max_new_tokens=ARITH_MAX_TOKENS, do_sample=False,
                              pad_token_id=tokenizer.pad_token_id)
        replies = tokenizer.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        right += [int(reward_of(r, p) == 1.0) for r, p in zip(replies, batch)]
    return right


def percent(items: list[int]) -> float:
    return 100.0 * sum(items) / len(items)


def start_path(out: str | Path, learner: str, sft_steps: int, seed: int) -> Path:
    """Where :func:`start_adapter` keeps seed's start under the work folder ``out``."""
    return Path(out) / f"seed-{seed}" / "models" / "sft+lora" / learner / f"checkpoint-{sft_steps}"


def start_adapter(args, seed: int) -> Path:
    """The start of both arms of a seed: ``args.sft_steps`` steps of SFT-LoRA on the programmatic
    solver's won training episodes, trained once into ``args.out``."""
    from playpen.models import load_model_by_name
    from playpen.training import catalog
    from transformers import set_seed
    target = start_path(args.out, args.learner, args.sft_steps, seed)
    if not target.exists():
        set_seed(seed)
        cls = catalog.trainer_class("sft")
        config = cls.config_class(games="arith_solver", train_instances=ARITH_TRAIN, max_steps=args.sft_steps,
                                  batch_size=8, learning_rate=2e-4, save_steps=args.sft_steps,
                                  models_dir=str(target.parents[2]), evaluate=False)
        learner = load_model_by_name(args.learner, gen_args=dict(temperature=0.7, max_tokens=ARITH_MAX_TOKENS),
                                     role="learner")
        cls(learner, config=config, seed=seed, progress=True).learn(None)
    return target


def tost_p(differences: list[float], margin: float) -> float:
    """The larger of the two one-sided tests' p-values of |mean difference| < margin (normal
    approximation: used on per-problem differences, hundreds of them)."""
    import math
    from statistics import NormalDist, mean, stdev
    n = len(differences)
    if n < 2 or stdev(differences) == 0:
        return 0.0 if abs(mean(differences)) < margin else 1.0
    se = stdev(differences) / math.sqrt(n)
    lower = 1 - NormalDist().cdf((mean(differences) + margin) / se)
    upper = NormalDist().cdf((mean(differences) - margin) / se)
    return max(lower, upper)
