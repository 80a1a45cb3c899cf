"""The learning protocol (issue 28): does learning in interaction beat more imitation?

    python benchmarks/protocol.py --methods expert-iteration,spin --seeds 1,2,3   # hours; cached per seed
    python benchmarks/protocol.py --report                                         # report + plots only
    python benchmarks/protocol.py --report --against sft --family A,B              # A, B each against the warm-up, Holm over 2
    python benchmarks/protocol.py --quick --out /tmp/protocol -l tiny-random       # minutes: the plumbing
    python benchmarks/protocol.py --forgetting-only --seeds 1,2,3                  # forgetting of the finished seeds
    python benchmarks/protocol.py --add-only --add-settings taboo/self-play        # a setting added after selection
    python benchmarks/protocol.py --drift-only --seeds 1                           # drift on the warm-up's replies
    python benchmarks/protocol.py --retention-only --seeds 1 --checkpoints 8       # retention on the base model's replies

The methods are data, ``benchmarks/protocol-methods.json``: edit an entry or add one and rerun.

Per seed: an SFT-LoRA warm-up on the programmatic players' won training episodes, trained
in chunks of ``--warmup-chunk`` steps until its dev score stops improving
(``--warmup-patience`` chunks without a gain; the best chunk is kept): every method starts
from the best imitation model of its seed. Then every method, and the control
``continued-sft`` (the warm-up's SFT continued), trains from that adapter with the same
budget in training examples (``--budget-examples``: a method's steps are the budget over its
rows per optimizer step), not wall time: CPU contention does not change a result.

Every held-out set is split once into dev and test (benchmarks/protocol-splits.json,
benchmarks/protocol_splits.py). Dev is played on the primary settings at 0/25/50/75/100 % of
each budget (the curves; ``--checkpoints N``: at every 1/N, a checkpoint saved at each; every
configuration tried is in ``dev-log.jsonl``; the methods start from the warm-up's best
checkpoint, or with ``--start-step N`` from its checkpoint after N steps); test is played once per final
configuration — the warm-up (method ``sft``) and each method's last adapter — and kept per
(method, seed, game, setting) in ``<out>/<method>--seed<S>--<game>--<role>.json`` with
``scores``: item id -> that item's score (aborted = 0). A result is never replaced: a
changed configuration under an existing name is refused (name the variant). Scores are
clemscore-style per episode: Main Score when played, 0 when aborted.

A run cut off goes on where it stopped, with the same command. A finished result is cached; an
interrupted warm-up continues from the chunks the dev log holds (``models/sft/warm-up.key``).
An arm (method, seed) writes its configuration's fingerprint to ``models/<method>/arm.key``
before it trains: killed after training, while its dev or test was played, it trains nothing
on the next start (``trained before (same configuration), its checkpoints played``; its
``train_seconds`` the dev log's, None when none was logged); stopped during training, it
continues from its last checkpoint (the trainer's ``--resume``; ``resumed after N of M
steps``) and its dev rows and results say ``resumed_from: N`` (its random stream from there on
may differ from an uninterrupted run's). Another configuration in that folder trains from step 0.

The report (``protocol_report.py``) compares each method with the control item by item:
exact sign-flip p, Holm over methods x primary settings, intervals clustered by item
(referencegame: by target) and seed, the detectable effect, forgetting, curves.

The primary settings are the protocol's own (``ProtocolSetting.primary``: the taboo guesser and
the other trained roles; not the referencegame follower nor the describer) unless ``--primary``
names others among ``--settings``: then those alone are what the methods' dev plays (their
curves, a study's choice) and the Holm family. The warm-up still stops on the default family
among the selected settings, so a study shares the protocol's warm-ups (same keys); only when
none of the default family is selected does ``--primary`` steer the warm-up and join its
fingerprint (and so every method's).

Forgetting beyond the protocol's games (``protocol_forgetting.py``; ``--forgetting`` after each
seed, ``--forgetting-only`` on what has finished, nothing trained): the out-of-domain set's
clemscore and the statscore of the base model and of every final configuration, in files of
their own (``forgetting--<method>--seed<S>.json``) with their own fingerprints: the test
results and their fingerprints are never touched. Retention (``protocol_retention.py``,
``--retention-only``): the log-probability, under every finished adapter, of the base model's
greedy first-turn replies in games and roles no method trains, in files of their own too.
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness import Setting, run_dir_of  # the benchmarks' shared module, beside this script (its folder is on sys.path)
from harness import fingerprint as harness_fingerprint
from protocol_choice import SETTING as CHOICE_SETTING
from protocol_choice import run_choice
from protocol_drift import run_drift
from protocol_forgetting import final_configurations, final_results, forgetting_games, run_forgetting
from protocol_report import against_report, build_report, read_dev_log, result_name, run_folder, scores_of_run
from protocol_retention import DEFAULT_RETENTION_SETTINGS, RETENTION_SETTINGS, run_retention
from protocol_splits import SPLITS_FILE, check_splits, load_splits

REPO_ROOT = Path(__file__).resolve().parents[1]
OUT = REPO_ROOT / "benchmarks" / "results" / "protocol"
CONTROL, WARM_UP = "continued-sft", "sft"
WARM_UP_KEEP = 10_000  # the warm-up's checkpoints kept: all (warm_up_saving)
CHECKPOINTS = 4  # dev at 25/50/75/100 % of a budget unless --checkpoints says otherwise
ARM_KEY = "arm.key"  # in an arm's models folder: the fingerprint of its checkpoints' configuration
ARM_RESUMED = "arm.resumed"  # beside it: the step its training was first resumed after (its RNG stream differs)


@dataclass(frozen=True)
class ProtocolSetting(Setting):
    """A held-out setting; `split`: its game's entry in protocol-splits.json; `primary`:
    in the family of tests (the referencegame follower is a diagnostic)."""

    split: str = ""
    primary: bool = True
    instances: str = ""  # played from this instances file (the split's items) instead of the split's own


SETTINGS = (
    ProtocolSetting("taboo/guesser", "taboo", 1, "programmatic", split="taboo"),
    ProtocolSetting("taboo/self-play", "taboo", split="taboo"),
    ProtocolSetting("privateshared/answerer", "privateshared", split="privateshared"),
    ProtocolSetting("arith_solver/solver", "arith_solver", split="arith_solver"),
    ProtocolSetting("referencegame/follower", "referencegame", 1, "programmatic", split="referencegame",
                    primary=False),
    # the describer with a fixed listener (issue 42, study 1): the learner clues, the programmatic
    # guesser guesses; and the same items with a held-out listener that knows half its cues
    ProtocolSetting("taboo/describer", "taboo", 0, "programmatic", split="taboo", primary=False),
    ProtocolSetting("taboo/describer-listener", "taboo", 0, "programmatic", split="taboo", primary=False,
                    instances="instances_protocol_listener"),
)
GAMES = "taboo,privateshared,arith_solver,referencegame"
LEARNER_ROLE = {"taboo": "Guesser", "privateshared": "Answerer", "arith_solver": "Solver"}


@dataclass(frozen=True)
class Method:
    """A packaged trainer (its name in ``playpen run --list``), its options (budget and starting adapter come from the protocol),
    its partner while training and the games it trains."""

    trainer: str
    options: dict = field(default_factory=dict)
    teacher: str | None = None
    trains: tuple = ()
    temperature: float = 0.7
    description: str = ""


METHODS_FILE = Path(__file__).with_name("protocol-methods.json")
METHOD_KEYS = {"trainer", "options", "teacher", "trains", "temperature", "description", "note"}


def load_methods(path: Path = METHODS_FILE) -> dict[str, Method]:
    """name -> Method from the methods file (a user edits it and reruns; ``note`` says why an
    entry exists and is not read). A malformed entry stops the run naming the file and entry."""
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))["methods"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"protocol.py: {path}: not a methods file ({type(e).__name__}: {e})") from e
    methods = {}
    for name, entry in entries.items():
        unknown = set(entry) - METHOD_KEYS if isinstance(entry, dict) else None
        if unknown is None or unknown or not isinstance(entry.get("trainer"), str) \
                or not isinstance(entry.get("options", {}), dict):
            raise SystemExit(f"protocol.py: {path}: method '{name}': expected an object with a trainer, options "
                             f"and {', '.join(sorted(METHOD_KEYS - {'trainer', 'options'}))}"
                             + (f" (unknown: {', '.join(sorted(unknown))})" if unknown else ""))
        methods[name] = Method(entry["trainer"], dict(entry.get("options", {})), entry.get("teacher"),
                               tuple(entry.get("trains", ())), entry.get("temperature", 0.7),
                               entry.get("description", ""))
    missing = {WARM_UP, CONTROL} - set(methods)
    if missing:
        raise SystemExit(f"protocol.py: {path}: the warm-up and the control must be methods "
                         f"(missing: {', '.join(sorted(missing))})")
    return methods


METHODS = load_methods()


# ----------------------------------------------------------------------------- configuration

def method_of(name: str, args) -> Method:
    """The method as this run trains it: with ``--train-games``, its games narrowed to those
    (a method with none of them left is refused before anything runs)."""
    method = METHODS[name]
    if not args.train_games:
        return method
    games = [g for g in method.options.get("games", ",".join(method.trains)).split(",") if g in args.train_games]
    if not games:
        raise SystemExit(f"protocol.py: {name} trains none of --train-games {','.join(args.train_games)} "
                         f"(it trains {','.join(method.trains)})")
    options = {**method.options, "games": ",".join(games)}
    if "roles" in options:  # the learner's roles of the games left (a trainer refuses a role its games lack)
        dropped = {role for game, role in LEARNER_ROLE.items() if game not in games}
        options["roles"] = ",".join(r for r in options["roles"].split(",") if r not in dropped)
    return replace(method, options=options, trains=tuple(games))


def selection_key(args, name: str = WARM_UP) -> tuple:
    """What the settings and training-games selection adds to a configuration's fingerprint
    (nothing without a selection, so that the results of full runs keep their keys)."""
    names = tuple(s.name for s in args.settings)
    if names == tuple(s.name for s in SETTINGS) and not args.train_games:
        return ()
    return (names, tuple(method_of(name, args).trains))


def warm_up_settings(args) -> tuple:
    """The settings whose dev mean stops the warm-up: the protocol's default family among the
    selected settings, whatever ``--primary`` names (so that a study choosing its methods on
    another setting starts from the same warm-ups as the protocol); the ``--primary`` family
    only when no default one is selected."""
    default = tuple(s for s in SETTINGS if s.primary and s.name in {t.name for t in args.settings})
    return default or tuple(s for s in args.settings if s.primary)


def primary_key(args) -> tuple:
    """What ``--primary`` adds to the warm-up's fingerprint: nothing while the warm-up stops on
    the default family (:func:`warm_up_settings`), else that family (the warm-up then stops
    elsewhere; every method's key holds the warm-up's)."""
    default = tuple(s.name for s in SETTINGS if s.primary and s.name in {t.name for t in args.settings})
    return () if default else (("primary", tuple(s.name for s in args.settings if s.primary)),)


def with_primary(settings, primary: tuple) -> tuple:
    """``settings`` with exactly the ``primary`` ones primary (none given: as they are)."""
    return tuple(replace(s, primary=s.name in primary) for s in settings) if primary else tuple(settings)


def fractions(args) -> tuple:
    """The budget fractions a method's dev is played at: every 1/N of it (``--checkpoints N``)."""
    n = args.checkpoints or CHECKPOINTS
    return tuple(k / n for k in range(1, n + 1))


def rows_per_step(config) -> int:
    """Training examples an optimizer step consumes: episodes for GRPO (groups x their
    size), conversations or pairs for the others (batch x accumulation)."""
    if hasattr(config, "num_generations") and hasattr(config, "groups_per_step"):
        return config.num_generations * config.groups_per_step
    return config.batch_size * getattr(config, "gradient_accumulation_steps", 1)


def configure(name: str, method: Method, args, models_dir: Path, init_adapter: Path | None, max_steps: int | None,
              **extra):
    """(trainer class, config, options) with the trainer's own checks done (no model loads)."""
    from playpen.training import catalog
    cls = catalog.trainer_class(method.trainer)
    options = dict(method.options, models_dir=str(models_dir), evaluate=False, **extra)
    if init_adapter is not None:
        options["init_adapter"] = str(init_adapter)
    if args.quick:
        fields = cls.config_class.__dataclass_fields__
        for key, small in (("pair_instances", 1), ("pairs_per_round", 4), ("num_generations", 2),
                           ("groups_per_step", 1), ("demo_max_instances", 1), ("batch_size", 2),
                           ("instances_per_round", 2), ("samples_per_instance", 2), ("sft_batch", 2),
                           ("max_length", 256)):
            if key in fields:
                options[key] = small
        if "rounds" in fields:
            options["rounds"] = min(options.get("rounds", 1), 2)
    if max_steps is None:  # the method's budget in steps: its share of the examples
        rows = rows_per_step(cls.config_class(**{**options, "max_steps": 1000}))
        max_steps = max(options.get("rounds", 1), args.budget_examples // rows)
    options["max_steps"] = max_steps
    options.setdefault("save_steps", max(1, round(max_steps / (args.checkpoints or CHECKPOINTS))))
    options.setdefault("save_total_limit", max(8, max_steps // options["save_steps"] + 1))  # 8: every default run
    config = cls.config_class(**options)
    cls.check(config, args.learner, method.teacher)
    return cls, config, options


def fingerprint(*parts) -> str:
    return harness_fingerprint(parts)


# ----------------------------------------------------------------------------- playing

def evaluate_split(adapter: Path | None, split: str, label: str, args, work: Path,
                   settings=None) -> dict:
    """Every setting on one split with the learner (+ adapter), greedily: setting ->
    {"scores": item -> score (aborted = 0), "played": item -> 0/1}."""
    from playpen.evaluation import evaluate
    from playpen.models import load_model_by_name
    splits = load_splits(args.splits)
    greedy = dict(temperature=0.0, max_tokens=args.max_tokens)
    learner = load_model_by_name(args.learner, gen_args=greedy, role="learner", adapter=adapter, run_name=label)
    partner = load_model_by_name("programmatic", gen_args=greedy, role="partner")
    out = {}
    # dev steers choices (the warm-up's stop, the curves): only the primary settings; test plays all
    chosen = settings or [s for s in args.settings if s.primary or split == "test"]
    for setting in chosen:
        entry = splits["games"][setting.split]
        items = split_items(splits, args, setting.name, split)
        players = setting.players(learner, partner if setting.partner else None)
        table = evaluate(players, [setting.game], results_dir=work / "results",
                         instances=setting.instances or entry["instances"],
                         items=items, batch_size=16, run_name=run_folder(label, split, setting.name),
                         overwrite=True)
        out[setting.name] = scores_of_run(Path(table.run_dir) / setting.game, items)
    del learner
    return out


def split_items(splits: dict, args, setting_name: str, split: str) -> list[str]:
    """The items a setting plays on `split` (the first ``--max-items`` of them when given)."""
    entry = splits["games"][next(s.split for s in SETTINGS if s.name == setting_name)]
    return entry[split][:args.max_items] if args.max_items else entry[split]


def dev_mean(rows: dict, settings) -> float:
    """The warm-up's criterion: the mean dev score over the primary settings' items
    (``settings``: this run's, ``--primary`` applied)."""
    primary = [s.name for s in settings if s.primary and s.name in rows]  # rows: the selected settings only
    values = [v for name in primary for v in rows[name]["scores"].values()]
    return sum(values) / len(values) if values else 0.0


def log_dev(out: Path, **row) -> None:
    with (out / "dev-log.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps(row, sort_keys=True) + "\n")


def train(cls, config, method: Method, args, seed: int, records: Path) -> None:
    from playpen.models import load_model_by_name
    from transformers import set_seed
    set_seed(seed)  # python, numpy, torch (every device)
    gen_args = dict(temperature=method.temperature, max_tokens=args.max_tokens)
    learner = load_model_by_name(args.learner, gen_args=gen_args, role="learner")
    teacher = load_model_by_name(method.teacher, gen_args=gen_args, role="teacher") if method.teacher else None
    trainer = cls(learner, teacher, config=config, output_dir=records, seed=seed, progress=False)
    trainer.learn(None)
    if trainer.interrupted_by is not None:  # Ctrl-C or SIGTERM: the run saved and returned; the protocol stops too
        from playpen.errors import Interrupted
        raise Interrupted(trainer.interrupted_by)
    del trainer, learner


def summaries(dev: dict) -> dict:
    """Per setting: the mean score, the item count and every item's score of a split's
    evaluation (for the log: a screen can then be tested item by item, across seeds)."""
    return {name: {"mean": round(sum(r["scores"].values()) / max(1, len(r["scores"])), 3), "items": len(r["scores"]),
                   "scores": {item: round(v, 3) for item, v in sorted(r["scores"].items())}}
            for name, r in dev.items()}


# ----------------------------------------------------------------------------- the warm-up

def warm_up(seed: int, args, out: Path, work: Path) -> Path:
    """The seed's warm-up adapter: SFT chunk by chunk while dev improves (cached)."""
    method = method_of(WARM_UP, args)
    key = fingerprint(WARM_UP, method.options, seed, args.learner, args.warmup_chunk, args.warmup_patience,
                      args.warmup_max_chunks, args.quick, args.max_items, args.max_tokens,
                      *selection_key(args), *primary_key(args))
    marker = work / f"seed-{seed}" / "warm-up.json"
    if marker.exists():
        done = json.loads(marker.read_text())
        if done["fingerprint"] == key and Path(done["adapter"]).exists():
            return Path(done["adapter"])
    models = work / f"seed-{seed}" / "models" / WARM_UP
    # an interrupted warm-up goes on from its last chunk: the chunks the dev log holds for this
    # configuration, whose checkpoints this configuration wrote (models/warm-up.key), are not trained
    # again; a logged chunk whose checkpoint is gone is trained again but not played on dev again
    owner = models / "warm-up.key"
    logged = {r["step"]: r["dev_mean"] for r in read_dev_log(out)
              if r.get("method") == WARM_UP and r.get("seed") == seed and r.get("fingerprint") == key}
    owned = holds_key(owner, key)
    from playpen.training.common.dev_stopping import BestSoFar
    rule, retrained = BestSoFar(patience=args.warmup_patience), set()  # the package's rule (SFT --dev-patience)
    for chunk in range(1, args.warmup_max_chunks + 1):
        steps = chunk * args.warmup_chunk
        adapter = run_dir_of(models) / f"checkpoint-{steps}" if models.exists() else None
        if steps in logged and owned and adapter is not None and adapter.exists():
            score = logged[steps]
            print(f"== seed {seed} warm-up: {steps} steps, dev {score:.2f} (logged before)", flush=True)
        else:
            cls, config, options = configure(WARM_UP, method, args, models, None, steps,
                                             **warm_up_saving(args), resume=chunk > 1, overwrite=chunk == 1)
            if chunk == 1:
                owner.unlink(missing_ok=True)
            train(cls, config, method, args, seed, work / f"seed-{seed}" / "records")
            if chunk == 1:
                owner.write_text(key + "\n", encoding="utf-8")
            adapter = run_dir_of(models) / f"checkpoint-{steps}"
            if steps in logged:  # the same configuration's chunk, its checkpoint gone: its dev is not played again
                score = logged[steps]
                retrained.add(steps)
                print(f"== seed {seed} warm-up: {steps} steps, dev {score:.2f} (logged before; retrained)", flush=True)
            else:
                criterion = warm_up_settings(args)
                dev = evaluate_split(adapter, "dev", f"seed{seed}-sft-{steps}", args, work, settings=criterion)
                score = dev_mean(dev, criterion)
                log_dev(out, method=WARM_UP, seed=seed, step=steps, fingerprint=key, options=options,
                        dev=summaries(dev), dev_mean=score)
                print(f"== seed {seed} warm-up: {steps} steps, dev {score:.2f}", flush=True)
        if rule.add(steps, score):
            break
    best = run_dir_of(models) / f"checkpoint-{rule.best_step}"
    if rule.best_step in retrained:
        check_retrained(best, rule.best_score, seed, key, args, out, work)
    marker.write_text(json.dumps({"fingerprint": key, "adapter": str(best), "dev": rule.best_score,
                                  "curve": rule.curve}))
    return best


def warm_up_saving(args) -> dict:
    """A checkpoint at the end of every chunk, and none rotated away: a resumed warm-up reads
    each logged chunk's checkpoint, and the chosen one is where the methods start. An interrupted
    chunk saves one more (SIGTERM), which counts toward any limit; with one per chunk, two
    interruptions rotated the first chunk's away, and the warm-up was trained again from step 0.
    (Not part of the warm-up's fingerprint: it changes which files stay, not what is trained.)"""
    return dict(save_steps=args.warmup_chunk, save_total_limit=WARM_UP_KEEP)


def checkpoint_number(adapter: Path) -> int:
    return int(adapter.name.rsplit("-", 1)[1])


def check_retrained(best: Path, logged_score: float, seed: int, key: str, args, out: Path, work: Path) -> None:
    """The warm-up's best chunk was trained again after its dev row was logged (its checkpoint
    was gone) and chosen by that row: it is played on dev once, and the run stops unless it
    reproduces the logged score (training is deterministic here; a change of code or machine
    that breaks that must not pass a logged score off as this adapter's). The row, with every
    item's score, is logged again."""
    criterion = warm_up_settings(args)
    steps = checkpoint_number(best)
    dev = evaluate_split(best, "dev", f"seed{seed}-sft-{steps}", args, work, settings=criterion)
    score = dev_mean(dev, criterion)
    if abs(score - logged_score) > 1e-6:
        raise SystemExit(f"protocol.py: seed {seed} warm-up: checkpoint-{steps}, trained again, scores {score:.3f} "
                         f"on dev where its logged row says {logged_score:.3f}: the retrained warm-up is not the "
                         f"logged one; remove its rows from {out / 'dev-log.jsonl'} to play every chunk again")
    log_dev(out, method=WARM_UP, seed=seed, step=steps, fingerprint=key, dev=summaries(dev), dev_mean=score,
            checked="retrained best chunk, played again")
    print(f"== seed {seed} warm-up: {steps} steps, dev {score:.2f} (retrained, played again: the logged score)",
          flush=True)


def holds_key(owner: Path, key: str) -> bool:
    """True when the key file `owner` names the configuration `key` (a models folder's owner)."""
    return owner.exists() and owner.read_text(encoding="utf-8").strip() == key


def warm_up_key(work: Path, seed: int) -> str:
    """The fingerprint of the seed's warm-up: part of every result that starts from it."""
    return json.loads((work / f"seed-{seed}" / "warm-up.json").read_text())["fingerprint"]


# ----------------------------------------------------------------------------- a method

def write_results(out: Path, name: str, method: Method, seed: int, key: str, test: dict, extra: dict,
                  settings) -> None:
    """One result file per setting of ``test`` (``settings``: this run's, ``--primary`` applied)."""
    from playpen.files import write_json
    for setting in (s for s in settings if s.name in test):
        row = test[setting.name]
        write_json(out / result_name(name, seed, setting.name), {
            "method": name, "seed": seed, "game": setting.game, "setting": setting.name, "split": "test",
            "scores": row["scores"], "played": row["played"], "primary": setting.primary,
            **({"first_clue_broke": row["first_clue_broke"]} if "first_clue_broke" in row else {}),
            "trains": list(method.trains), "fingerprint": key, **extra}, indent=1)


def cached(out: Path, name: str, seed: int, key: str, settings) -> bool:
    """True when every selected setting's test result of this configuration exists; a result of
    another configuration under this name: refused (the test split is played once)."""
    found = [out / result_name(name, seed, s.name) for s in settings]
    keys = {json.loads(p.read_text()).get("fingerprint") for p in found if p.exists()}
    if keys - {key}:
        raise SystemExit(f"protocol.py: {name} (seed {seed}) has test results of another configuration in {out}: "
                         f"the test split is played once per configuration; give the variant its own name")
    return len(keys) == 1 and all(p.exists() for p in found)


def screened_curve(out: Path, name: str, seed: int, key: str, wanted: tuple) -> list:
    """This configuration's dev rows for the seed, one per budget fraction of ``wanted`` (the
    last logged wins), when the dev log holds all of them; else []."""
    found = {r["fraction"]: r for r in read_dev_log(out) if r.get("method") == name and r.get("seed") == seed
             and r.get("fingerprint") == key and r.get("fraction") is not None}
    return [found[f] for f in wanted] if set(wanted) <= set(found) else []


def run_method(name: str, seed: int, adapter0: Path, args, out: Path, work: Path) -> None:
    method = method_of(name, args)
    models = work / f"seed-{seed}" / "models" / name
    cls, config, options = configure(name, method, args, models, adapter0, None, overwrite=True)
    key = fingerprint(name, options | {"models_dir": None, "init_adapter": None}, method.teacher, method.temperature,
                      seed, args.learner, args.quick, args.max_items, args.max_tokens, warm_up_key(work, seed),
                      *selection_key(args, name),
                      adapter0.name)
    if cached(out, name, seed, key, args.settings):
        print(f"== {name} seed {seed}: cached", flush=True)
        return
    from playpen.errors import DatasetError
    from playpen.training.common.checkpoints import checkpoint_step, checkpoints
    steps = options["max_steps"]
    screened = screened_curve(out, name, seed, key, fractions(args))
    if screened and args.dev_only:
        print(f"== {name} seed {seed}: dev curve cached (--dev-only)", flush=True)
        return
    run_dir = run_dir_of(models) if models.exists() else None  # a folder with only its key file: none
    saved = {checkpoint_step(p): p for p in checkpoints(run_dir)} if run_dir else {}
    owner = models / ARM_KEY
    # screened with --dev-only before: its checkpoints go to the test split, unless another configuration
    # has trained into the folder since (its key file names another key; a folder without one predates keys)
    if screened and steps in saved and (holds_key(owner, key) or not owner.exists()):
        print(f"== {name} seed {seed}: screened on dev before, its {steps}-step checkpoint to test", flush=True)
        curve = [{"fraction": r["fraction"], "step": r["step"], "dev": r["dev"]} for r in screened]
        test_and_write(name, method, seed, key, config, options, saved[steps], screened[-1].get("train_seconds"),
                       curve, args, out, work)
        return
    done = owned_checkpoints(owner, key, saved)
    resumed_from = max(done, default=None) if steps not in done else None
    if steps in done:  # trained before, killed while its dev or test was played: nothing to train
        print(f"== {name} seed {seed}: trained before (same configuration), its checkpoints played", flush=True)
        seconds = logged_seconds(out, name, seed, key)
    else:
        try:
            seconds = train_arm(name, method, seed, args, models, adapter0, key, resumed_from, cls, config, work)
        except DatasetError as error:  # its play gave it nothing to learn (e.g. nothing won): the policy stays the
            # warm-up's, a result of the method; any other error (a locked run folder, a full disk) stops the run
            print(f"== {name} seed {seed}: failed: {error}", flush=True)
            if args.dev_only:
                return
            test = evaluate_split(adapter0, "test", f"seed{seed}-{name}", args, work)
            write_results(out, name, method, seed, key, test, {
                "failed": str(error), "steps": 0, "budget_examples": args.budget_examples,
                "options": {k: v for k, v in options.items() if k != "models_dir"}, "teacher": method.teacher,
                "description": method.description, "dev_curve": []}, (*args.settings, *args.add_settings))
            return
    saved = {checkpoint_step(p): p for p in checkpoints(run_dir_of(models))}
    first_resumed = models / ARM_RESUMED  # the step after which its training was first resumed, if it was
    resumed = {"resumed_from": int(first_resumed.read_text())} if first_resumed.exists() else {}
    curve, played = [], {}
    for fraction in fractions(args):  # the checkpoint nearest each fraction of the budget (each played once)
        step = min(saved, key=lambda s: (abs(s - fraction * steps), -s))
        if step not in played:
            played[step] = evaluate_split(saved[step], "dev", f"seed{seed}-{name}-{step}", args, work)
        dev = played[step]
        curve.append({"fraction": fraction, "step": step, "dev": summaries(dev)})
        log_dev(out, method=name, seed=seed, step=step, fraction=fraction, fingerprint=key, options=options,
                dev=summaries(dev), dev_mean=dev_mean(dev, args.settings), train_seconds=seconds,
                start=adapter0.name, **resumed)
    if args.dev_only:  # a candidate screened on dev: the test split stays untouched
        print(f"== {name} seed {seed}: dev {dev_mean(dev, args.settings):.2f} at the full budget (--dev-only: no test)",
              flush=True)
        return
    test_and_write(name, method, seed, key, config, options, saved[max(saved)], seconds, curve, args,
                   out, work, resumed)


def logged_seconds(out: Path, name: str, seed: int, key: str) -> float | None:
    """The training seconds the dev log holds for this configuration (the last logged); None
    when its training was never logged (killed before its dev rows were written)."""
    logged = [r["train_seconds"] for r in read_dev_log(out) if r.get("method") == name and r.get("seed") == seed
              and r.get("fingerprint") == key and r.get("train_seconds") is not None]
    return logged[-1] if logged else None


def owned_checkpoints(owner: Path, key: str, saved: dict) -> dict:
    """`saved` (step -> checkpoint) when this configuration wrote them, else {}: the key file
    `owner` holds `key` and no checkpoint is older than it. The key is written before the
    trainer starts over, so checkpoints older than it are another configuration's, left by a
    kill before the trainer removed them."""
    from playpen.training.common.checkpoints import STATE_FILE
    if not holds_key(owner, key):
        return {}
    since = owner.stat().st_mtime
    return saved if all((p / STATE_FILE).stat().st_mtime >= since for p in saved.values()) else {}


def train_arm(name: str, method: Method, seed: int, args, models: Path, adapter0: Path, key: str,
              resumed_from: int | None, cls, config, work: Path) -> float:
    """Train the arm (`cls`, `config`: its trainer from the start, ``--overwrite``) from the
    start, its models folder's key file written first, or from its checkpoint after
    `resumed_from` steps (this configuration's, left by an interrupted run): the seconds this
    run trained (a resumed run: since it resumed)."""
    steps = config.max_steps
    if resumed_from is None:
        print(f"== {name} seed {seed}: {steps} steps of {rows_per_step(config)} examples", flush=True)
        models.mkdir(parents=True, exist_ok=True)
        (models / ARM_RESUMED).unlink(missing_ok=True)
        (models / ARM_KEY).write_text(key + "\n", encoding="utf-8")
    else:  # every checkpoint kept (an interruption saves one more, which would rotate the first away)
        print(f"== {name} seed {seed}: resumed after {resumed_from} of {steps} steps (same configuration)", flush=True)
        cls, config, _ = configure(name, method, args, models, adapter0, None, resume=True,
                                   save_total_limit=WARM_UP_KEEP)
        if not (models / ARM_RESUMED).exists():  # the first resumption: from here on its RNG stream may differ
            (models / ARM_RESUMED).write_text(f"{resumed_from}\n", encoding="utf-8")
    started = time.time()
    train(cls, config, method, args, seed, work / f"seed-{seed}" / "records")
    return round(time.time() - started, 1)


def test_and_write(name: str, method: Method, seed: int, key: str, config, options: dict, adapter: Path,
                   seconds, curve: list, args, out: Path, work: Path, resumed: dict | None = None) -> None:
    """The final configuration's one play of the test split, written with its dev curve
    (`resumed`: ``{"resumed_from": step}`` when its training was resumed)."""
    test = evaluate_split(adapter, "test", f"seed{seed}-{name}", args, work)
    write_results(out, name, method, seed, key, test, {
        "budget_examples": args.budget_examples, "steps": options["max_steps"],
        "examples_per_step": rows_per_step(config), "train_seconds": seconds,
        "options": {k: v for k, v in options.items() if k != "models_dir"},
        "teacher": method.teacher, "description": method.description, "dev_curve": curve, **(resumed or {})},
        (*args.settings, *args.add_settings))


# ----------------------------------------------------------------------------- settings added after selection

def run_added(seeds, names, args, out: Path, work: Path) -> None:
    """``--add-settings``: every finished configuration of the seeds (its final adapter, the one
    its test played) plays the test split of settings that were not in its run, once. Its dev
    choices (the warm-up's stop, which method went to test) never saw them, so the test split
    stays untouched by tuning; the files are the usual result files, marked ``added`` and keyed
    by the configuration's fingerprint (a retrained configuration is refused, not mixed)."""
    for seed in seeds:
        for name, adapter, key, _ in final_configurations(seed, names, out, work):
            todo = [s for s in args.add_settings if not cached(out, name, seed, key, [s])]
            if not todo:
                continue
            original = next(r for r in final_results(out, name, seed) if not r.get("added"))
            print(f"== added: {name} seed {seed} on {', '.join(s.name for s in todo)} (test)", flush=True)
            test = evaluate_split(adapter, "test", f"seed{seed}-{name}", args, work, settings=todo)
            kept = {k: v for k, v in original.items()
                    if k not in ("method", "seed", "game", "setting", "split", "scores", "played", "primary")}
            write_results(out, name, method_of(name, args), seed, key, test, {**kept, "added": True},
                          args.add_settings)


def run_warm_up_test(seed: int, adapter: Path, args, out: Path, work: Path) -> None:
    """The warm-up is a final configuration too (method ``sft``): its test scores, once."""
    key = fingerprint(WARM_UP, warm_up_key(work, seed), adapter.name)
    if cached(out, WARM_UP, seed, key, args.settings):
        return
    test = evaluate_split(adapter, "test", f"seed{seed}-sft", args, work)
    marker = json.loads((work / f"seed-{seed}" / "warm-up.json").read_text())
    write_results(out, WARM_UP, method_of(WARM_UP, args), seed, key, test, {
        "steps": int(adapter.name.rpartition("-")[2]), "description": METHODS[WARM_UP].description,
        "warm_up_curve": marker["curve"]}, args.settings)


def start_of(best: Path, args) -> Path:
    """Where the methods start: the warm-up's best checkpoint, or with ``--start-step N`` its
    checkpoint after N steps (headroom left: study 3); one line when the warm-up has none there.
    A method's key holds its start's name, so runs from different starts never mix."""
    if not args.start_step:
        return best
    chosen = best.parent / f"checkpoint-{args.start_step}"
    if not chosen.is_dir():
        from playpen.errors import PlaypenError
        kept = sorted(int(p.name.rpartition("-")[2]) for p in best.parent.glob("checkpoint-*"))
        raise PlaypenError(f"--start-step {args.start_step}: the warm-up has no checkpoint there; it kept "
                           f"{', '.join(map(str, kept))} (multiples of --warmup-chunk it trained)")
    return chosen


# ----------------------------------------------------------------------------- the run

def run_seeds(seeds, wanted, args, out: Path, work: Path, forgetting: bool, choice: bool) -> None:
    """Per seed: the warm-up, its test, every method (the control first), the added settings,
    forgetting and the forced choice; the report after each seed."""
    for name in wanted:  # every method's options checked by its trainer before anything runs
        configure(name, method_of(name, args), args, work / "check", None, None, overwrite=True)
    for seed in seeds:
        adapter = warm_up(seed, args, out, work)
        if not args.dev_only:
            run_warm_up_test(seed, adapter, args, out, work)
        start = start_of(adapter, args)
        for name in wanted:
            run_method(name, seed, start, args, out, work)
        if args.add_settings and not args.dev_only:
            run_added([seed], wanted, args, out, work)
        if forgetting:  # its own files and fingerprints, after the seed's test results
            run_forgetting([seed], wanted, args, out, work, GAMES.split(","))
        if choice:
            run_choice([seed], wanted, args, out, work, split_items(load_splits(args.splits), args, CHOICE_SETTING, "test"))
        build_report(out, METHODS, with_primary(SETTINGS, args.primary), load_splits(args.splits))


def main(argv=None) -> int:
    global METHODS  # every stage reads the methods of this run's file (--methods-file)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-l", "--learner", default="smol-135m")
    parser.add_argument("--methods", default=None,
                        help=f"comma-separated, the control always included (unless --skip-control); of "
                             f"--methods-file's, by default all but the warm-up: {','.join(METHODS)}")
    parser.add_argument("--methods-file", default=str(METHODS_FILE),
                        help="the methods (a study's own file: its 'sft' is the warm-up, its 'continued-sft' "
                             "the control) [default: benchmarks/protocol-methods.json]")
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated training seeds (>= 3 for the report)")
    parser.add_argument("--budget-examples", type=int, default=512,
                        help="training examples per method (steps = this / the method's rows per step)")
    parser.add_argument("--warmup-chunk", type=int, default=8, help="warm-up SFT steps between dev evaluations")
    parser.add_argument("--warmup-patience", type=int, default=2, help="chunks without a dev gain before it stops")
    parser.add_argument("--warmup-max-chunks", type=int, default=12)
    parser.add_argument("--max-tokens", type=int, default=40, help="tokens per generated turn")
    parser.add_argument("--max-items", type=int, default=0, help="first N items of each split (0 = all; plumbing)")
    parser.add_argument("--settings", default="",
                        help=f"comma-separated settings to play (default all): {','.join(s.name for s in SETTINGS)}")
    parser.add_argument("--primary", default="",
                        help="comma-separated settings of --settings that are the primary family of this run: the "
                             "warm-up's dev criterion, the settings played on dev and the report's Holm family "
                             "(default: the protocol's own, e.g. taboo/guesser; not the follower or the describer)")
    parser.add_argument("--checkpoints", type=int, default=None,
                        help="save and play dev at every 1/N of a method's budget (default 4: 25/50/75/100 %%); with "
                             "--retention-only, every kept checkpoint is measured")
    parser.add_argument("--train-games", default="",
                        help="comma-separated: every method trains only these of its games (default: its own)")
    parser.add_argument("--splits", default=str(SPLITS_FILE))
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--start-step", type=int, default=0,
                        help="the methods start from the warm-up's checkpoint after N steps instead of its best "
                             "(in-domain headroom left; 0 = the best)")
    parser.add_argument("--dev-only", action="store_true",
                        help="screen methods on dev: train and log the dev curve, never play the test split")
    parser.add_argument("--report", action="store_true", help="only the report and plots from the results")
    parser.add_argument("--against", default="",
                        help="with --report: also a report of the --family methods against these methods "
                             "(comma-separated; e.g. sft: each against its own warm-up), Holm over exactly "
                             "those comparisons, in protocol-report--against-A+B.md")
    parser.add_argument("--family", default="", help="with --against: the methods compared (comma-separated)")
    parser.add_argument("--quick", action="store_true", help="tiny budgets and 2 items per split: the plumbing only")
    parser.add_argument("--forgetting", action="store_true",
                        help="after each seed: the out-of-domain clemscore and the statscore of the base model and of "
                             "each final configuration (cached in forgetting--*.json)")
    parser.add_argument("--forgetting-only", action="store_true",
                        help="only that, for the configurations already finished (nothing trained), then the report")
    parser.add_argument("--choice", action="store_true",
                        help="after each seed: the referencegame follower's forced choice over its three answers "
                             "(log-probabilities; protocol_choice.py) of the base model and each final configuration")
    parser.add_argument("--choice-only", action="store_true",
                        help="only that, for the configurations already finished (nothing trained), then the report")
    parser.add_argument("--skip-control", action="store_true",
                        help="do not train the control in this run (another run of the same warm-up has it, or it "
                             "is read from published results); the methods named are trained")
    parser.add_argument("--drift-only", action="store_true",
                        help="only the drift of the finished configurations from their warm-up on its own greedy test "
                             "replies (log-likelihood per token, item by item; protocol_drift.py), nothing trained")
    parser.add_argument("--retention-only", action="store_true",
                        help="only the retention of the finished configurations on the base model's greedy first-turn "
                             "replies (log-likelihood per token, prompt by prompt; protocol_retention.py), nothing "
                             "trained")
    parser.add_argument("--retention-settings", default=DEFAULT_RETENTION_SETTINGS,
                        help=f"games/roles of the retention prompts [default: {DEFAULT_RETENTION_SETTINGS}]")
    parser.add_argument("--retention-prompts", type=int, default=60,
                        help="prompts per retention setting, drawn from its held-out instances")
    parser.add_argument("--add-settings", default="",
                        help="settings the finished configurations also play on test, once, after their selection "
                             "(after each seed; not in the warm-up's dev criterion nor the fingerprints)")
    parser.add_argument("--add-only", action="store_true",
                        help="only --add-settings, for the finished configurations of --seeds (nothing trained)")
    parser.add_argument("--forgetting-set", default="out_of_domain",
                        help="the game set whose clemscore measures forgetting (its games the protocol trains are "
                             "left out)")
    parser.add_argument("--forgetting-sets-file", default="", help="the sets file [default: playpen's]")
    parser.add_argument("--forgetting-instances", type=int, default=1,
                        help="instances per experiment of the set's games (0 = all; 1: 14 episodes of playpen's set)")
    parser.add_argument("--forgetting-static-limit", type=int, default=100,
                        help="questions per static task (0 = all)")
    args = parser.parse_args(argv)
    METHODS = load_methods(Path(args.methods_file))
    if args.methods is None:
        args.methods = ",".join(m for m in METHODS if m != WARM_UP)
    out = Path(args.out)
    if args.quick:
        args.budget_examples, args.warmup_chunk, args.warmup_max_chunks = 8, 1, 2
        args.max_items, args.max_tokens = args.max_items or 2, min(args.max_tokens, 8)
        args.forgetting_static_limit = min(args.forgetting_static_limit or 4, 4)
        if out.resolve() == OUT.resolve():
            print("protocol.py: --quick results are plumbing, not results: pass --out DIR", file=sys.stderr)
            return 2
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        print(f"protocol.py: --seeds {args.seeds!r}: expected comma-separated integers", file=sys.stderr)
        return 2
    named = {s.name: s for s in SETTINGS}
    chosen = [n for n in args.settings.split(",") if n]
    unknown_settings = [n for n in chosen if n not in named]
    if unknown_settings:
        print(f"protocol.py: unknown setting(s) {unknown_settings}; known: {','.join(named)}", file=sys.stderr)
        return 2
    args.settings = tuple(s for s in SETTINGS if s.name in chosen) if chosen else SETTINGS
    primary = tuple(n for n in args.primary.split(",") if n)
    if [n for n in primary if n not in {s.name for s in args.settings}]:
        print(f"protocol.py: --primary {args.primary!r}: expected settings of this run's --settings: "
              f"{','.join(s.name for s in args.settings)}", file=sys.stderr)
        return 2
    args.primary, args.settings = primary, with_primary(args.settings, primary)
    retention = tuple(n for n in args.retention_settings.split(",") if n)
    if not retention or [n for n in retention if n not in RETENTION_SETTINGS] or args.retention_prompts < 1 \
            or (args.checkpoints is not None and args.checkpoints < 1):
        print(f"protocol.py: --retention-settings {args.retention_settings!r} (of {DEFAULT_RETENTION_SETTINGS}), "
              f"--retention-prompts >= 1 and --checkpoints >= 1 expected", file=sys.stderr)
        return 2
    args.retention_settings = retention
    added = [n for n in args.add_settings.split(",") if n]
    if [n for n in added if n not in named] or {s.name for s in args.settings} & set(added):
        print(f"protocol.py: --add-settings {args.add_settings!r}: expected settings outside --settings, of: "
              f"{','.join(named)}", file=sys.stderr)
        return 2
    if args.add_only and not added:
        print("protocol.py: --add-only needs --add-settings", file=sys.stderr)
        return 2
    args.add_settings = with_primary((s for s in SETTINGS if s.name in added), primary)
    args.train_games = tuple(g for g in args.train_games.split(",") if g)
    wanted = [m for m in args.methods.split(",") if m]
    unknown = [m for m in wanted if m not in METHODS]
    if min(args.forgetting_instances, args.forgetting_static_limit) < 0:
        print("protocol.py: --forgetting-instances and --forgetting-static-limit must be >= 0 (0 = all)",
              file=sys.stderr)
        return 2
    if unknown or not seeds or min(args.budget_examples, args.warmup_chunk, args.warmup_max_chunks,
                                   args.warmup_patience) < 1:
        print(f"protocol.py: unknown method(s) {unknown}; known: {','.join(METHODS)}" if unknown else
              "protocol.py: --seeds, --budget-examples, --warmup-chunk, --warmup-max-chunks and --warmup-patience must be >= 1",
              file=sys.stderr)
        return 2
    family, against = [m for m in args.family.split(",") if m], [m for m in args.against.split(",") if m]
    if (args.against or args.family) and (not against or not family or not args.report or set(against) & set(family)
                                          or [m for m in against + family if m not in METHODS]):
        print(f"protocol.py: --against {args.against!r} --family {args.family!r}: expected --report with two "
              f"disjoint comma-separated lists of methods, of: {','.join(METHODS)}", file=sys.stderr)
        return 2
    problems = check_splits(load_splits(args.splits))
    if problems:
        print(f"protocol.py: {args.splits}: {problems[0]}", file=sys.stderr)
        return 2
    forgetting = (args.forgetting or args.forgetting_only) and not args.report
    choice = (args.choice or args.choice_only) and not args.report
    if choice and CHOICE_SETTING not in {s.name for s in args.settings}:
        print(f"protocol.py: --choice needs the {CHOICE_SETTING} setting among --settings", file=sys.stderr)
        return 2
    if forgetting:  # the set, lm-eval and its tasks: checked before anything runs
        from playpen.errors import PlaypenError
        try:
            forgetting_games(args, GAMES.split(","))
        except PlaypenError as e:
            print(f"protocol.py: --forgetting: {e}", file=sys.stderr)
            return 2
    out.mkdir(parents=True, exist_ok=True)
    others = [m for m in wanted if m not in (CONTROL, WARM_UP)]
    wanted = others if args.skip_control and others else [CONTROL] + others
    work = out / "work"
    only = (args.forgetting_only or args.choice_only or args.add_only or args.drift_only
            or args.retention_only) and not args.report
    from playpen.errors import Interrupted, PlaypenError
    try:
        if only and args.add_only:
            run_added(seeds, wanted, args, out, work)
        if only and args.forgetting_only:
            run_forgetting(seeds, wanted, args, out, work, GAMES.split(","))
        if only and args.drift_only:
            run_drift(seeds, wanted, args, out, work, {name: m.trains for name, m in METHODS.items()})
        if only and args.retention_only:
            run_retention(seeds, wanted, args, out, work)
        if only and args.choice_only:
            run_choice(seeds, wanted, args, out, work,
                       split_items(load_splits(args.splits), args, CHOICE_SETTING, "test"))
        if not only and not args.report:
            run_seeds(seeds, wanted, args, out, work, forgetting, choice)
    except PlaypenError as error:  # one line, for every stage; what finished is cached and a rerun goes on
        print(f"protocol.py: {error}", file=sys.stderr)
        return 1
    except Interrupted as stop:  # a signal stopped a training run (it saved): not an error of the run's
        print(f"protocol.py: interrupted by {signal.Signals(stop.signum).name}; what finished is cached, "
              f"the same command goes on", file=sys.stderr)
        return 128 + stop.signum
    settings, splits = with_primary(SETTINGS, args.primary), load_splits(args.splits)
    print(build_report(out, METHODS, settings, splits))
    if args.against:
        print(against_report(out, settings, splits, against, family))
    return 0


if __name__ == "__main__":
    sys.exit(main())
