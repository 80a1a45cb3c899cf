"""Superseded by benchmarks/protocol.py (dev/test splits, a warm-up to convergence, equal budget in
training examples, >= 3 seeds, exact paired tests); kept to reproduce its published files
(``results/learning-*.json``, ``learning-comparison.md``).

One held-out comparison of every learning method, run in parts and cached.

    python benchmarks/learning.py                                # every method not cached yet
    python benchmarks/learning.py --methods sft,dpo-branch,spin  # some methods (the warm-up as needed)
    python benchmarks/learning.py --table                        # rebuild table + PNG from the cache
    python benchmarks/learning.py --quick --out /tmp/bench       # minutes: the plumbing only

Protocol (issues 11 and 12): the learner (smol-135m) gets one shared SFT-LoRA warm-up on the
programmatic players' won episodes of the training instances; every other method starts
from that adapter and trains for at most ``--minutes`` of wall time (the warm-up: its 8 steps) (a callback stops it,
with a checkpoint). Each result is evaluated on the same held-out, balanced instances with
greedy decoding in five settings (:data:`SETTINGS`): referencegame as Instruction Follower
with the programmatic giver and in self-play, taboo as Guesser with the programmatic
describer and in self-play, adversarial_taboo as Attacker against the programmatic Defender.

Each method's result — table rows, the referencegame follower's answer distribution, its
training log (the curve) and wall times — is cached as
``benchmarks/results/learning-<method>.json`` together with a fingerprint of its options and
code; a method re-runs only when that fingerprint changes (or with ``--force``). The table
(``learning-comparison.md``) and the PNG (``learning-comparison.png``) are rebuilt from the
cache after every method, so a comparison can be run over several sessions. Adapters and
records go below ``<out>/learning/`` (git-ignored); a cached method whose adapter is gone
is still tabulated, and the warm-up is re-trained only when a method needs its adapter.
Wall times on a shared 2-core CPU are comparable only within a quiet run.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from playpen.training import catalog

# the benchmarks' shared module and this script's report, beside it (a script's folder is on sys.path)
from harness import Setting, answer_distribution, cached_result, final_adapter, run_dir_of, stop_after
from harness import fingerprint as fingerprint_of
from learning_report import (
    WIN_SETTING, attacker_win_rate, build_report, episode_scores, method_label, setting_run_name)

REPO_ROOT = Path(__file__).resolve().parents[1]
GAMES = ("referencegame", "taboo", "adversarial_taboo")


SETTINGS = (
    Setting("referencegame/follower", "referencegame", 1, "programmatic"),
    Setting("referencegame/self-play", "referencegame"),
    Setting("taboo/guesser", "taboo", 1, "programmatic"),
    Setting("taboo/self-play", "taboo"),
    Setting("adversarial_taboo/attacker", "adversarial_taboo", 0, "programmatic"),
)


@dataclass(frozen=True)
class Method:
    """A packaged trainer (its name, ``playpen run --list``), its options (on top of the shared
    ones), the teacher it plays with, the games it trains (the others must keep their format)
    and the modules it depends on."""

    trainer: str
    options: dict = field(default_factory=dict)
    teacher: str | None = None
    trains: tuple = ()
    code: tuple = ()
    description: str = ""
    temperature: float | None = None  # the learner's sampling temperature while training (None: --temperature)


DEFAULT_TEMPERATURE = 0.7
FOLLOWER_ROLES = "Instruction Follower,Guesser"
# GRPO as follower/guesser with the programmatic partner (grpo-partner; grpo-partner-hot adds to it)
PARTNER_GRPO = dict(games="referencegame,taboo", roles=FOLLOWER_ROLES, num_generations=8, groups_per_step=2, beta=0.0,
                    learning_rate=2e-4, max_steps=200, save_steps=5)
# GRPO self-play with the anti-collapse options (grpo-selfplay; the -hot and -warm variants start from it)
SELFPLAY_GRPO = dict(games="referencegame", num_generations=8, groups_per_step=2, beta=0.02, learning_rate=2e-4,
                     max_steps=200, save_steps=5, baseline="running", game_shares="referencegame:0.7,taboo:0.3",
                     augment=True)
METHODS = {
    "sft": Method("sft", dict(games="referencegame,taboo,adversarial_taboo", max_steps=8,
                                             batch_size=8, max_length=768, learning_rate=2e-4),
                  trains=GAMES, code=("playpen.training.sft.demonstrations",),
                  description="SFT-LoRA warm-up on the programmatic players' won training episodes"),
    "sft-more": Method("sft", dict(games="referencegame,taboo", roles=FOLLOWER_ROLES, max_steps=200,
                                                  batch_size=8, max_length=768, learning_rate=2e-4),
                       trains=("referencegame", "taboo"), code=("playpen.training.sft.demonstrations",),
                       description="15 more minutes of the warm-up's SFT, on the follower's and the guesser's "
                                   "demonstration turns only: the supervised signal at the same budget"),
    "sft-more-taboos": Method("sft", dict(games="taboo,adversarial_taboo", roles="Guesser,Attacker",
                                                         max_steps=200, batch_size=8, max_length=768,
                                                         learning_rate=2e-4),
                              trains=("taboo", "adversarial_taboo"), code=("playpen.training.sft.demonstrations",),
                              description="15 more minutes of the warm-up's SFT, on the taboo guesser's and the "
                                          "adversarial_taboo attacker's demonstration turns only"),
    "dpo-branch": Method("dpo", dict(games="referencegame,taboo", source="branching",
                                                    roles=FOLLOWER_ROLES, fork_turns="0", branches=4,
                                                    pair_instances=8, max_steps=40, learning_rate=5e-5),
                         teacher="programmatic", trains=("referencegame", "taboo"),
                         code=("playpen.training.preference.pair_sources", "playpen.training.preference.rounds",
                               "playpen.pairs"),
                         description="DPO on first-move branches finished by the programmatic partner"),
    "dpo-records": Method("dpo", dict(games="referencegame,taboo", source="records",
                                                     roles=FOLLOWER_ROLES, max_steps=40, learning_rate=5e-5),
                          trains=("referencegame", "taboo"),
                          code=("playpen.training.preference.pair_sources", "playpen.training.preference.rounds",
                                "playpen.pairs"),
                          description="DPO on recorded play: won (programmatic) vs lost (the SFT learner) "
                                      "episodes of the same training instances"),
    "spin": Method("spin", dict(games="referencegame,taboo", roles=FOLLOWER_ROLES, rounds=3,
                                               pairs_per_round=32, max_steps=30, learning_rate=5e-5),
                   trains=("referencegame", "taboo"),
                   code=("playpen.training.preference.spin", "playpen.training.preference.rounds"),
                   description="SPIN: programmatic demonstration turns vs the learner's own, 3 rounds"),
    "spin-3games": Method("spin", dict(games="referencegame,taboo,adversarial_taboo",
                                                      roles=f"{FOLLOWER_ROLES},Attacker", rounds=3,
                                                      demo_max_instances=12, pairs_per_round=40, max_steps=30,
                                                      learning_rate=5e-5),
                          trains=GAMES, code=("playpen.training.preference.spin", "playpen.training.preference.rounds"),
                          description="SPIN on all three games: the follower, the guesser and the attacker "
                                      "(demonstrations: the programmatic players' won episodes of 12 instances per "
                                      "experiment, so that the attacker's turns are ~1/5 of the pairs), 3 rounds"),
    "spin-taboos": Method("spin", dict(games="taboo,adversarial_taboo", roles="Guesser,Attacker",
                                                      rounds=3, pairs_per_round=40, max_steps=30,
                                                      learning_rate=5e-5),
                          trains=("taboo", "adversarial_taboo"),
                          code=("playpen.training.preference.spin", "playpen.training.preference.rounds"),
                          description="SPIN on the taboo guesser and the adversarial_taboo attacker (all their "
                                      "won training episodes: ~40 % of the pairs are attacker turns), 3 rounds"),
    "self-rewarding": Method("self-rewarding", dict(games="referencegame,taboo",
                                                                   roles=FOLLOWER_ROLES, max_steps=30, rounds=2,
                                                                   judge_max_tokens=48),
                             teacher="programmatic", trains=("referencegame", "taboo"),
                             code=("playpen.training.preference.self_rewarding", "playpen.training.rubrics.judging",
                                   "playpen.training.preference.rounds"),
                             description="self-rewarding: the learner judges its candidates, best vs worst -> DPO"),
    "self-rewarding-game": Method("self-rewarding", dict(games="referencegame,taboo",
                                                                        roles=FOLLOWER_ROLES, max_steps=30, rounds=2,
                                                                        reward="game"),
                                  teacher="programmatic", trains=("referencegame", "taboo"),
                                  code=("playpen.training.preference.self_rewarding", "playpen.training.preference.rounds"),
                                  description="self-rewarding, external-reward variant: candidates ranked by "
                                              "the game's outcome, best vs worst -> DPO"),
    "grpo-partner": Method("grpo-teacher", PARTNER_GRPO,
                           teacher="programmatic", trains=("referencegame", "taboo"),
                           code=("playpen.training.grpo.rollout_bridge",),
                           description="GRPO as follower/guesser with the programmatic partner"),
    "grpo-selfplay": Method("grpo", SELFPLAY_GRPO,
                            trains=("referencegame", "taboo"), code=("playpen.training.grpo.rollout_bridge",),
                            description="GRPO self-play with the anti-collapse options (running baseline, "
                                        "KL to the SFT adapter, a taboo share, shuffled grids)"),
    "grpo-selfplay-hot": Method("grpo", SELFPLAY_GRPO,
                                trains=("referencegame", "taboo"), code=("playpen.training.grpo.rollout_bridge",),
                                temperature=1.0,
                                description="grpo-selfplay sampling at temperature 1.0 instead of 0.7: more "
                                            "answers other than the SFT adapter's constant one in each group"),
    "grpo-selfplay-warm": Method("grpo",
                                 dict(SELFPLAY_GRPO, game_shares="referencegame:0.5,taboo:0.5"),
                                 trains=("referencegame", "taboo"), code=("playpen.training.grpo.rollout_bridge",),
                                 temperature=0.85,
                                 description="grpo-selfplay at temperature 0.85 (1.0 broke the format for 6 steps) "
                                             "with half of the episodes on taboo (the guesser's game) instead of 30 %"),
    "grpo-partner-hot": Method("grpo-teacher",
                               dict(PARTNER_GRPO, beta=0.02, baseline="running", augment=True),
                               teacher="programmatic", trains=("referencegame", "taboo"),
                               code=("playpen.training.grpo.rollout_bridge",), temperature=1.0,
                               description="GRPO as follower/guesser with the programmatic partner, sampling at "
                                           "temperature 1.0, with the anti-collapse options (running baseline, "
                                           "KL to the SFT adapter, shuffled grids)"),
    "grpo-selfplay-mix": Method("grpo",
                                dict(SELFPLAY_GRPO, partners="self:0.5,programmatic:0.5",
                                     game_shares="referencegame:0.5,taboo:0.5"),
                                trains=("referencegame", "taboo"), code=("playpen.training.grpo.rollout_bridge",),
                                temperature=1.0,
                                description="grpo-selfplay-hot with a partner mix: half of the groups play against "
                                            "the programmatic partner (clear clues and expressions), half in "
                                            "self-play, half of them on taboo"),
    "grpo-selfplay-sft": Method("grpo", dict(SELFPLAY_GRPO, sft_coef=1.0, sft_batch=8),
                                trains=("referencegame", "taboo"),
                                code=("playpen.training.grpo.rollout_bridge", "playpen.training.sft.anchor"),
                                temperature=1.0,
                                description="grpo-selfplay-hot with a supervised anchor: every step adds the SFT "
                                            "loss of 8 demonstration conversations (--sft-coef 1)"),
    "grpo-follower-shared": Method("grpo-teacher",
                                   dict(games="referencegame", roles="Instruction Follower", num_generations=8,
                                        groups_per_step=2, beta=0.04, learning_rate=5e-5, max_steps=200,
                                        save_steps=20, micro_batch_size=8, augment_variants=3),
                                   teacher="programmatic", trains=("referencegame",),
                                   code=("playpen.training.grpo.rollout_bridge", "playpen.training.grpo.steps",
                                         "playpen.training.shared_prefix"),
                                   temperature=1.0,
                                   description="GRPO as Instruction Follower with the programmatic giver, steps "
                                               "sharing each prompt's pass (micro-batches of a group, 3 grid orders "
                                               "per group): ~4x the episodes of grpo-partner in the same 15 minutes; "
                                               "lr 5e-5 and KL 0.04 to the SFT adapter (at lr 2e-4 without KL the "
                                               "answers collapsed to `second` within 8 steps)"),
    "grpo-selfplay-sft-shared": Method("grpo",
                                       dict(SELFPLAY_GRPO, sft_coef=1.0, sft_batch=8, micro_batch_size=8,
                                            augment_variants=3),
                                       trains=("referencegame", "taboo"),
                                       code=("playpen.training.grpo.rollout_bridge", "playpen.training.sft.anchor",
                                             "playpen.training.grpo.steps", "playpen.training.shared_prefix"),
                                       temperature=1.0,
                                       description="grpo-selfplay-sft with steps sharing their prompts' passes "
                                                   "(micro-batches of 8 rows, 3 grid orders per group): more "
                                                   "episodes in the same 15 minutes"),
    # SPAG-1 sized to its budget: imitation ~10 s a step here, then one self-play epoch
    "spag": Method("spag", dict(games="adversarial_taboo", imitation_steps=56,
                                                episodes_per_epoch=32, max_steps=12), teacher="programmatic",
                   trains=("adversarial_taboo",), code=("playpen.training.spag.objective", "playpen.training.spag.phases"),
                   description="SPAG-1 on adversarial_taboo (56 imitation steps + one self-play epoch of 32 episodes)"),
}
# what every result depends on besides its own trainer; deliberately narrow (a change of a
# log line elsewhere must not cost hours of re-runs): --force re-runs after wider changes
SHARED_CODE = ("playpen.evaluation",)


def training_temperature(method: Method, args) -> float:
    """The learner's sampling temperature while a method trains: its own, else ``--temperature``."""
    return method.temperature if method.temperature is not None else args.temperature


def settings_of(args) -> dict:
    """The ``--set`` options of a run (none for arguments made without them)."""
    return getattr(args, "set", None) or {}


def fingerprint(name: str, method: Method, args) -> str:
    """What decides a method's result: its options, the shared protocol and its code."""
    # the warm-up trains its own steps whatever --minutes says: its fingerprint keeps the default's
    # budget, so that one warm-up serves runs of any --minutes (and the caches made before stay valid)
    minutes = 15.0 if name == "sft" and not args.quick else args.minutes
    protocol = dict(learner=args.learner, minutes=minutes, eval_instances=args.eval_instances,
                    max_tokens=args.max_tokens, seed=args.seed, quick=args.quick,
                    settings=[s.name for s in SETTINGS])
    temperature = training_temperature(method, args)
    if temperature != DEFAULT_TEMPERATURE:  # the caches made at the default keep their fingerprints
        protocol["temperature"] = temperature
    overrides = settings_of(args)
    if overrides and name != "sft":  # --set (not the shared warm-up); without it the fingerprints stay as they were
        protocol["set"] = dict(sorted(overrides.items()))
    modules = (catalog.TRAINERS[method.trainer].target.partition(":")[0],) if method.trainer else ()
    return fingerprint_of([name, method.options, method.teacher, protocol], (*modules, *method.code, *SHARED_CODE))


def evaluate_settings(base: str, adapter: Path | None, label: str, args, work: Path) -> dict:
    """Play every setting with the learner (+ adapter) greedily; rows per setting."""
    from playpen.evaluation import evaluate
    from playpen.models import load_model_by_name
    greedy = dict(temperature=0.0, max_tokens=args.max_tokens)
    learner = load_model_by_name(base, gen_args=greedy, role="learner", adapter=adapter, run_name=label)
    partners = {}
    rows, answers, started = {}, {}, time.time()
    for setting in SETTINGS:
        if setting.partner and setting.partner not in partners:
            partners[setting.partner] = load_model_by_name(setting.partner, gen_args=greedy, role="partner")
        players = setting.players(learner, partners.get(setting.partner))
        run_name = setting_run_name(label, setting.name)
        table = evaluate(players, [setting.game], results_dir=work / "results", batch_size=16,
                         max_instances=args.eval_instances, run_name=run_name, overwrite=True)
        game = table.to_dict()["games"][0]
        rows[setting.name] = {"percent_played": game["percent_played"], "quality": game["quality"],
                              "episodes": game["num_episodes"]}
        rows[setting.name]["scores"] = episode_scores(Path(table.run_dir))  # for the gains' intervals
        if setting.name == WIN_SETTING:
            rows[setting.name]["win_rate"] = attacker_win_rate(Path(table.run_dir))
        if setting.game == "referencegame" and setting.partner:
            answers[setting.name] = answer_distribution(Path(table.run_dir))
        print(f"  {setting.name:<28} played {game['percent_played']:6.1f}  quality "
              f"{game['quality'] if game['quality'] is not None else 'n/a'}", flush=True)
    del learner
    return {"settings": rows, "answers": answers, "eval_seconds": round(time.time() - started, 1)}


def configure(name: str, method: Method, args, work: Path, init_adapter: Path | None = None):
    """(trainer class, its config) for a method; the trainer's own checks run here, before any
    model loads, so that a wrong option fails the benchmark at once, not after hours."""
    cls = catalog.trainer_class(method.trainer)
    fields = {f for f in cls.config_class.__dataclass_fields__}
    options = dict(method.options, models_dir=str(work / "models" / name), overwrite=True, evaluate=False)
    if name != "sft":  # --set KEY=VALUE: for every method whose trainer has KEY; the warm-up stays the same
        options.update({k: v for k, v in settings_of(args).items() if k in fields})
    if init_adapter is not None:
        options["init_adapter"] = str(init_adapter)
    if name == "dpo-records":  # filled by recorded_play() before training
        options["records"] = str(work / "recorded-play")
        (work / "recorded-play").mkdir(parents=True, exist_ok=True)
    if args.quick:
        options.update(max_steps=2, save_steps=1)
        for key, small in (("pair_instances", 1), ("pairs_per_round", 4), ("rounds", 1), ("num_generations", 2),
                           ("groups_per_step", 1), ("demo_max_instances", 1), ("batch_size", 2)):
            if key in fields:
                options[key] = small
    unknown = sorted(set(options) - fields)
    if unknown:
        raise SystemExit(f"learning.py: method {name}: {method.trainer} has no option(s) {unknown}")
    config = cls.config_class(**options)
    cls.check(config, args.learner, method.teacher)
    return cls, config, options


def train(name: str, method: Method, args, work: Path, init_adapter: Path | None) -> tuple[Path | None, dict]:
    """Train one method for at most --minutes; (its final adapter, facts for the cache)."""
    from playpen.models import load_model_by_name
    from playpen.training.common.plotting import read_log
    models_dir = work / "models" / name
    if name == "dpo-records":
        recorded_play(args, work, init_adapter)
    cls, config, options = configure(name, method, args, work, init_adapter)
    gen_args = dict(temperature=training_temperature(method, args), max_tokens=args.max_tokens)
    learner = load_model_by_name(args.learner, gen_args=gen_args, role="learner")
    teacher = load_model_by_name(method.teacher, gen_args=gen_args, role="teacher") if method.teacher else None
    trainer = cls(learner, teacher, config=config, output_dir=work / "records" / name, seed=args.seed)
    if name != "sft":  # the shared warm-up trains its steps; every other method has --minutes
        trainer.add_callback(stop_after(args.minutes * 60))
    started = time.time()
    trainer.learn(None)
    seconds = time.time() - started
    del trainer, learner
    run_dir = run_dir_of(models_dir)
    log = read_log(run_dir) if run_dir is not None else []
    keep = ("step", "time", "train/loss", "rollout/reward_mean", "rollout/percent_played", "train/peak_rss_mb",
            "peak_rss_mb", "train/rewards/margins", "train/rewards/accuracies", "rollout/dropped_groups")
    curve = [{k: v for k, v in row.items()  # the step's time split and memory too: tables from the cache
              if k in keep or k.startswith(("train/", "rollout/", "time/", "memory/"))}
             for row in log]
    return final_adapter(run_dir), {"train_seconds": round(seconds, 1), "steps": len(log), "log": curve,
                                    "options": {k: v for k, v in options.items() if k != "models_dir"}}


def recorded_play(args, work: Path, sft_adapter: Path | None) -> Path:
    """Records for DPO's recorded-play source: the programmatic players (they win) and the
    SFT learner (it mostly loses) on the same training instances, one results folder."""
    from playpen.evaluation import evaluate
    from playpen.models import load_model_by_name
    folder = work / "recorded-play"
    greedy = dict(temperature=0.0, max_tokens=args.max_tokens)
    per_experiment = 1 if args.quick else 6
    programmatic = load_model_by_name("programmatic", gen_args=greedy, role="partner")
    learner = load_model_by_name(args.learner, gen_args=greedy, role="learner", adapter=sft_adapter,
                                 run_name=f"{args.learner}+sft")
    for game, slot in (("referencegame", 1), ("taboo", 1)):
        for label, players in (("programmatic", [programmatic]),
                               ("learner", [programmatic, learner] if slot == 1 else [learner, programmatic])):
            evaluate(players, [game], results_dir=folder, instances="instances_train", batch_size=16,
                     max_instances=per_experiment, run_name=f"{label}-{game}", overwrite=True)
    del learner
    return folder


def parse_settings(items: list[str]) -> dict:
    """``--set`` values: KEY=VALUE with VALUE read as JSON (numbers, true/false), else a string."""
    settings = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key.isidentifier():
            raise ValueError(f"{item!r} is not KEY=VALUE (e.g. micro_batch_size=16)")
        try:
            settings[key] = json.loads(value)
        except json.JSONDecodeError:
            settings[key] = value
    return settings


def cache_path(out: Path, name: str) -> Path:
    return out / f"learning-{name}.json"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-l", "--learner", default="smol-135m")
    parser.add_argument("--methods", default=",".join(["baseline", *METHODS]),
                        help=f"comma-separated: baseline,{','.join(METHODS)}")
    parser.add_argument("--minutes", type=float, default=15.0, help="training wall time per method")
    parser.add_argument("--eval-instances", type=int, default=6,
                        help="held-out instances per experiment (6 = each referencegame target position twice: "
                             "a constant answer scores 33.3)")
    parser.add_argument("--max-tokens", type=int, default=40, help="tokens per generated turn")
    parser.add_argument("--temperature", type=float, default=DEFAULT_TEMPERATURE,
                        help="sampling temperature while training (a method may set its own)")
    parser.add_argument("--out", default=str(REPO_ROOT / "benchmarks" / "results"))
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--force", action="store_true", help="re-run the methods named in --methods although cached (the SFT warm-up only when named)")
    parser.add_argument("--table", action="store_true", help="only rebuild the table and PNG from the cache")
    parser.add_argument("--quick", action="store_true", help="tiny budgets: checks the plumbing only")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="an option for every method whose trainer has it (not the SFT warm-up), e.g. "
                             "micro_batch_size=16 on a GPU; part of the methods' fingerprints")
    args = parser.parse_args(argv)
    try:
        args.set = parse_settings(args.set)
    except ValueError as error:
        print(f"learning.py: --set: {error}", file=sys.stderr)
        return 2
    if args.quick:
        args.minutes, args.eval_instances = min(args.minutes, 1.0), 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    wanted = [m for m in args.methods.split(",") if m]
    unknown = [m for m in wanted if m != "baseline" and m not in METHODS]
    if unknown:
        print(f"learning.py: unknown method(s) {unknown}; known: baseline,{','.join(METHODS)}", file=sys.stderr)
        return 2
    if not args.table:
        run_methods(wanted, args, out)
    report = build_report(out, ["baseline", *METHODS], METHODS, [s.name for s in SETTINGS])
    print(report)
    return 0


def run_methods(wanted: list[str], args, out: Path) -> None:
    from playpen.errors import PlaypenError
    from playpen.files import write_json
    from transformers import set_seed
    work = out / "learning"
    sft_adapter: Path | None = None

    def cached(name, method):
        # --force re-runs the methods named in --methods; the shared warm-up only when named too
        if args.force and name in wanted:
            return None
        return cached_result(cache_path(out, name), fingerprint(name, method, args))

    def warm_up() -> Path | None:
        nonlocal sft_adapter
        method = METHODS["sft"]
        data = cached("sft", method)
        if data is not None and data.get("adapter") and Path(data["adapter"]).exists():
            sft_adapter = Path(data["adapter"])
            return sft_adapter
        print("== sft (warm-up)", flush=True)
        set_seed(args.seed)
        sft_adapter, facts = train("sft", method, args, work, None)
        facts.update(evaluate_settings(args.learner, sft_adapter, method_label(args.learner, "sft"), args, work))
        write_json(cache_path(out, "sft"), {"method": "sft", "fingerprint": fingerprint("sft", method, args),
                                             "adapter": str(sft_adapter), "trains": list(method.trains),
                                             "description": method.description, **facts})
        return sft_adapter

    known = set()
    for name in wanted:  # every method's options, checked by its trainer before anything runs
        if name not in ("baseline", "sft"):
            cls, _, _ = configure(name, METHODS[name], args, work)
            known |= set(cls.config_class.__dataclass_fields__)
    unused = sorted(set(settings_of(args)) - known)
    if unused:
        raise SystemExit(f"learning.py: --set {', '.join(unused)}: no trainer of the methods {wanted} has "
                         f"such an option")
    for name in wanted:
        if name == "baseline":
            method = Method("", trains=())
            if cached(name, method) is None:
                print("== baseline", flush=True)
                facts = evaluate_settings(args.learner, None, method_label(args.learner, name), args, work)
                write_json(cache_path(out, name), {"method": name, "fingerprint": fingerprint(name, method, args),
                                                    "trains": [], "description": "the learner as is", **facts})
            continue
        method = METHODS[name]
        if name == "sft":
            warm_up()
            continue
        if cached(name, method) is not None:
            print(f"== {name}: cached", flush=True)
            continue
        adapter = warm_up()
        print(f"== {name}", flush=True)
        set_seed(args.seed)
        try:
            final, facts = train(name, method, args, work, adapter)
        except PlaypenError as error:  # the method itself could not go on: a result too, shown as such
            print(f"== {name}: failed: {error}", flush=True)
            write_json(cache_path(out, name), {"method": name, "fingerprint": fingerprint(name, method, args),
                                               "adapter": None, "trains": list(method.trains),
                                               "description": method.description, "failed": str(error),
                                               "settings": {}, "steps": 0, "train_seconds": 0})
            build_report(out, ["baseline", *METHODS], METHODS, [s.name for s in SETTINGS])
            continue
        facts.update(evaluate_settings(args.learner, final, method_label(args.learner, name), args, work))
        write_json(cache_path(out, name), {"method": name, "fingerprint": fingerprint(name, method, args),
                                           "adapter": str(final), "trains": list(method.trains),
                                           "description": method.description, **facts})
        build_report(out, ["baseline", *METHODS], METHODS, [s.name for s in SETTINGS])


if __name__ == "__main__":
    sys.exit(main())
