"""Retention on the base model's replies (issue 42, study 3): how likely each trained adapter
still finds what the base model says in games and roles no protocol method trains.

    python benchmarks/protocol.py --retention-only --seeds 1,2,3 --checkpoints 8 --out benchmarks/results/study-3

The prompt set, once per learner (``retention-prompts--<learner>.json`` in the out folder):
for each setting of ``--retention-settings``, ``--retention-prompts`` items (default 60) drawn
with a fixed seed from the game's held-out instances, played by the BASE model greedily with
the programmatic partner until its first turn (the episode is cut there); the prompt it got
and its reply are kept. Prompts that render the same conversation are kept once (a game whose
first prompt does not depend on the instance would count one reply many times: plain wordle's
guesser does, so the default plays ``wordle_withclue``, whose first prompt holds the clue).

Per adapter — every finished configuration's final adapter (the warm-up's chosen chunk, a
failed method's: the warm-up's), with ``--checkpoints`` every checkpoint its method kept, and
the base model — the mean log-probability per token of each reply given its prompt
(:mod:`playpen.evaluation.retention`, forward passes only), in
``retention--<method>--seed<S>--<step>.json`` (``retention--base.json``), keyed by the adapter,
its configuration's fingerprint and the prompt set's; ``change``: per prompt, the value
minus the seed's warm-up's (0 for the warm-up itself). A configuration is finished when its
test results exist, or, screened with ``--dev-only``, when the dev log holds its full budget.
The report's table: ``protocol_report.retention_lines``.
"""
from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from pathlib import Path

from harness import fingerprint, run_dir_of  # the benchmarks' shared module (this folder is on sys.path)
from protocol_forgetting import _relative, final_results
from protocol_report import BASE, WARM_UP, read_dev_log, retention_file

from playpen.games import GAMES_DIR

PROMPTS_SEED = 0


@dataclass(frozen=True)
class RetentionSetting:
    """A game and role the protocol does not train: its folder, held-out instances file and
    the learner's slot beside the programmatic partner (None: a one-player game)."""

    name: str
    game: str
    folder: str
    instances: str
    learner_slot: int = 0
    partner: str | None = None

    def players(self, learner, partner):
        if self.partner is None:
            return [learner]
        return [learner, partner] if self.learner_slot == 0 else [partner, learner]


RETENTION_SETTINGS = {s.name: s for s in (
    RetentionSetting("privateshared/answerer", "privateshared", "privateshared", "instances_protocol"),
    RetentionSetting("arith_solver/solver", "arith_solver", "proposer_solver", "instances_solver_protocol"),
    RetentionSetting("wordle_withclue/guesser", "wordle_withclue", "wordle", "instances"),
    RetentionSetting("imagegame/giver", "imagegame", "imagegame", "instances", 0, "programmatic"),
    RetentionSetting("referencegame/follower", "referencegame", "referencegame", "instances", 1, "programmatic"),
)}
DEFAULT_RETENTION_SETTINGS = ",".join(RETENTION_SETTINGS)


def held_out_items(setting: RetentionSetting, n: int) -> list[str]:
    """``n`` item ids (``experiment/game_id``) of the setting's held-out file, drawn with
    :data:`PROMPTS_SEED` (all of them, in file order, when it has no more)."""
    data = json.loads((GAMES_DIR / "builtin" / setting.folder / "in" / f"{setting.instances}.json").read_text(encoding="utf-8"))
    items = [f"{e['name']}/{i['game_id']}" for e in data["experiments"] for i in e["game_instances"]]
    return items if len(items) <= n else sorted(random.Random(f"{PROMPTS_SEED}-{setting.name}").sample(items, n))


def first_turns(setting: RetentionSetting, items: list[str], args, work: Path) -> list[dict]:
    """The base model's greedy first turn in each item, its partner programmatic: one record
    ``{"setting", "item", "messages": prompt + reply, "meta"}`` per distinct prompt."""
    from playpen.data import conversational_records
    from playpen.envs.turns import turn_limit
    from playpen.evaluation import evaluate
    from playpen.models import load_model_by_name
    greedy = dict(temperature=0.0, max_tokens=args.max_tokens)
    learner = load_model_by_name(args.learner, gen_args=greedy, role="learner")
    partner = load_model_by_name("programmatic", gen_args=greedy, role="partner") if setting.partner else None
    with turn_limit(setting.learner_slot + 1):  # the episode ends at the learner's first reply
        table = evaluate(setting.players(learner, partner), [setting.game], results_dir=work / "results",
                         instances=setting.instances, items=items, batch_size=16, overwrite=True,
                         run_name=f"retention-prompts--{setting.name.replace('/', '-')}")
    del learner
    records, _ = conversational_records(Path(table.run_dir) / setting.game)
    by_item = {f"{r['meta']['experiment']}/{r['meta']['game_id']}": r for r in records}
    out, seen = [], set()
    for item in items:
        record = by_item.get(item)
        reply = next((i for i, m in enumerate(record["messages"]) if m["role"] == "assistant"), None) \
            if record else None
        if reply is None:
            continue
        prompt = json.dumps(record["messages"][:reply], sort_keys=True)
        if prompt in seen:
            continue
        seen.add(prompt)
        meta = {k: record["meta"][k] for k in ("game", "experiment", "game_id", "player_name")}
        out.append({"setting": setting.name, "item": item, "messages": record["messages"][:reply + 1], "meta": meta})
    return out


def prompt_set(args, out: Path, work: Path) -> dict:
    """The cached prompt set of this learner (built once; again when its settings change)."""
    from playpen.files import write_json
    wanted = {"learner": args.learner, "settings": list(args.retention_settings), "per_setting": args.retention_prompts,
              "seed": PROMPTS_SEED, "max_tokens": args.max_tokens}
    path = out / f"retention-prompts--{args.learner.replace('/', '-')}.json"
    if path.exists():
        found = json.loads(path.read_text(encoding="utf-8"))
        if {k: found.get(k) for k in wanted} == wanted:
            return found
    records = []
    for name in args.retention_settings:
        setting = RETENTION_SETTINGS[name]
        items = held_out_items(setting, args.retention_prompts)
        found = first_turns(setting, items, args, work)
        print(f"== retention: {name}: {len(found)} prompts of {len(items)} items (the base model's first turns)",
              flush=True)
        records += found
    data = {**wanted, "fingerprint": fingerprint(("retention-prompts", wanted, records)), "records": records}
    write_json(path, data, indent=1)
    return data


def retention_configurations(seed: int, names, out: Path, work: Path, every: bool) -> list[tuple]:
    """(method, step, adapter, configuration fingerprint, failed) of the seed's finished
    configurations, the warm-up first; ``every``: each checkpoint a method kept, else its last."""
    from playpen.training.common.checkpoints import checkpoint_step, checkpoints
    marker = work / f"seed-{seed}" / "warm-up.json"
    if not marker.exists():
        return []
    warm = json.loads(marker.read_text(encoding="utf-8"))
    warm_adapter = Path(warm["adapter"])
    found = [(WARM_UP, checkpoint_step(warm_adapter), warm_adapter, warm["fingerprint"], False)]
    screened = {r["method"]: r for r in read_dev_log(out) if r.get("seed") == seed and r.get("fraction") == 1.0}
    for name in (n for n in names if n != WARM_UP):
        results = final_results(out, name, seed)
        if results and any(r.get("failed") for r in results):  # its policy stayed the warm-up's
            found.append((name, checkpoint_step(warm_adapter), warm_adapter, results[0]["fingerprint"], True))
            continue
        key = results[0]["fingerprint"] if results else screened.get(name, {}).get("fingerprint")
        run_dir = run_dir_of(work / f"seed-{seed}" / "models" / name) if key else None
        saved = checkpoints(run_dir) if run_dir else []
        if not saved:
            continue  # not finished (or not run) for this seed
        found += [(name, checkpoint_step(p), p, key, False) for p in (saved if every else saved[-1:])]
    return found


def run_retention(seeds, names, args, out: Path, work: Path) -> None:
    """The prompt set once, then the base model and every finished configuration's adapters
    of `seeds`, each cached in its own file."""
    from playpen.evaluation.retention import each_adapter_logprobs, turn_rows
    from playpen.files import write_json
    from playpen.models import load_model_by_name
    prompts = prompt_set(args, out, work)
    jobs = [(BASE, None, None, None, "", False)]
    for seed in seeds:
        jobs += [(name, seed, step, adapter, key, failed) for name, step, adapter, key, failed
                 in retention_configurations(seed, names, out, work, args.checkpoints is not None)]
    todo = {}
    for name, seed, step, adapter, config_key, failed in jobs:
        adapter_id = None if adapter is None else _relative(adapter, work)
        key = fingerprint(("retention", name, seed, adapter_id, config_key, prompts["fingerprint"]))
        path = out / retention_file(name, seed, step)
        if not (path.exists() and json.loads(path.read_text(encoding="utf-8")).get("fingerprint") == key):
            todo[path] = (adapter, {"method": name, "seed": seed, "step": step, "adapter": adapter_id,
                                    "fingerprint": key, "config_fingerprint": config_key, "failed": failed})
    if not todo:
        return
    learner = load_model_by_name(args.learner, role="learner")
    rows = turn_rows(learner.tokenizer, prompts["records"], getattr(learner, "_chat_template_kwargs", None))
    setting_of = {"/".join(str(r["meta"][k]) for k in ("game", "experiment", "game_id", "player_name")): r["setting"]
                  for r in prompts["records"]}
    print(f"== retention: {len(todo)} adapters, {len(rows)} prompts each", flush=True)
    started = time.time()
    for path, values in each_adapter_logprobs(learner.model, rows, {p: a for p, (a, _) in todo.items()}):
        head = todo[path][1]
        start = None  # the seed's warm-up's values (written before its methods')
        if head["method"] == WARM_UP:
            start = values
        elif head["seed"] is not None:
            warm = out / retention_file(WARM_UP, head["seed"], _warm_step(jobs, head["seed"]))
            start = json.loads(warm.read_text(encoding="utf-8"))["logprobs"]
        write_json(path, {**head, "learner": args.learner, "prompts_fingerprint": prompts["fingerprint"],
                          "settings": setting_of, "logprobs": values,
                          "change": None if start is None else {i: v - start[i] for i, v in values.items()},
                          "seconds": round(time.time() - started, 1)}, indent=1)
        started = time.time()
    del learner


def _warm_step(jobs, seed) -> int | None:
    return next((step for name, s, step, *_ in jobs if name == WARM_UP and s == seed), None)
