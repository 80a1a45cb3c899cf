"""The learning protocol's report, built only from its per-(method, seed, setting) test
results and its dev log, so that it can be rebuilt (and checked) anywhere.

Every non-control method is compared with ``continued-sft`` item by item on the test split:
the per-item difference is the method's score minus the control's, averaged over the seeds
both have; the exact sign-flip p (two-sided) and Wilcoxon's are over those items; Holm
adjusts the sign-flip p over the family of methods x primary settings; the 95 % interval
of the mean difference resamples items in clusters (a referencegame target with its
positions) and seeds; the detectable effect is that of a paired test on the setting's
items at the observed spread, α = 0.05, power 0.8. Forgetting: % played and score on the
settings of games a method did not train, against the warm-up of the same seeds; and, from
the forgetting stage's files (``protocol_forgetting.py``), the out-of-domain set's clemscore
and the statscore of each final configuration, before (the base model; the warm-up of the
same seed) -> after, mean ± sd over seeds.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from playpen.evaluation import statistics as stats

CONTROL, WARM_UP, BASE = "continued-sft", "sft", "base"
ALPHA = 0.05
MAX_PLAYED_DROP = 5.0  # the target: no untrained game loses more than 5 points of % played
FORGETTING_PREFIX = "forgetting--"
CHOICE_PREFIX = "choice--"
RETENTION_PREFIX = "retention--"


def result_name(method: str, seed: int, setting: str) -> str:
    """``<method>--seed<S>--<game>--<role>.json`` (setting ``game/role``)."""
    return f"{method}--seed{seed}--{setting.replace('/', '--')}.json"


def run_folder(label: str, split: str, setting: str) -> str:
    """The results folder of one split's play of one setting (``<label>--<split>--<game>-<role>``);
    a final configuration's test label is ``seed<S>-<method>``."""
    return f"{label}--{split}--{setting.replace('/', '-')}"


def forgetting_file(method: str, seed: int | None) -> str:
    """``forgetting--<method>--seed<S>.json``; the base model's: ``forgetting--base.json``."""
    return f"{FORGETTING_PREFIX}{method}{'' if seed is None else f'--seed{seed}'}.json"


def choice_file(method: str, seed: int | None) -> str:
    """``choice--<method>--seed<S>.json``; the base model's: ``choice--base.json``."""
    return f"{CHOICE_PREFIX}{method}{'' if seed is None else f'--seed{seed}'}.json"


def retention_file(method: str, seed: int | None, step: int | None) -> str:
    """``retention--<method>--seed<S>--<step>.json``; the base model's: ``retention--base.json``."""
    return f"{RETENTION_PREFIX}{method}" + ("" if seed is None else f"--seed{seed}--{step}") + ".json"


def item_of(episode_dir: Path) -> str:
    """``<experiment>/<instance id>`` of an episode folder (``<experiment>/instance_<id>``)."""
    return f"{episode_dir.parent.name}/{int(episode_dir.name.rpartition('_')[2])}"


def scores_of_run(game_dir: Path, items) -> dict:
    """``{"scores": item -> score, "played": item -> 0/1}`` for `items` from a results
    folder of one game (``<experiment>/instance_<id>/scores.json``): the Main Score of a
    played episode, 0 for an aborted, unscored or missing one. For taboo also
    ``"first_clue_broke"``: item -> 1 when the describer's first clue broke the taboo rule
    (the episode ended with "invalid clue" before any guess; interactions.json's keys)."""
    scores = {item: 0.0 for item in items}
    played = {item: 0 for item in items}
    broke = {}
    for path in Path(game_dir).rglob("scores.json"):
        item = item_of(path.parent)
        if item not in scores:
            continue
        episode = json.loads(path.read_text(encoding="utf-8")).get("episode scores", {})
        main = episode.get("Main Score")
        aborted = episode.get("Aborted") == 1 or main is None or (isinstance(main, float) and math.isnan(main))
        scores[item], played[item] = (0.0, 0) if aborted else (float(main), 1)
        interactions = path.parent / "interactions.json"
        keys = json.loads(interactions.read_text(encoding="utf-8")) if interactions.exists() else {}
        if "End Reason" in keys and "Guesses" in keys:  # taboo's
            broke[item] = int(keys["End Reason"] == "invalid clue" and not keys["Guesses"])
    out = {"scores": scores, "played": played}
    if broke:
        out["first_clue_broke"] = {item: broke.get(item, 0) for item in items}
    return out


def load_results(out: Path) -> dict:
    """(method, setting) -> seed -> the result file's content."""
    found: dict = {}
    for path in sorted(Path(out).glob("*--seed*--*.json")):
        if path.name.startswith((FORGETTING_PREFIX, CHOICE_PREFIX, RETENTION_PREFIX)):  # the stages' own files
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        found.setdefault((data["method"], data["setting"]), {})[data["seed"]] = data
    return found


def compare(mine: dict, control: dict, cluster_of: dict) -> dict | None:
    """The paired comparison of one method with the control on one setting (see the module)."""
    seeds = sorted(set(mine) & set(control))
    if not seeds:
        return None
    differences = {(s, i): mine[s]["scores"][i] - control[s]["scores"][i]
                   for s in seeds for i in mine[s]["scores"] if i in control[s]["scores"]}
    items = sorted({i for _, i in differences})
    per_item = [sum(differences[(s, i)] for s in seeds if (s, i) in differences)
                / sum((s, i) in differences for s in seeds) for i in items]
    interval = stats.clustered_interval(differences, cluster_of=cluster_of, seed=0)
    per_seed = [sum(mine[s]["scores"].values()) / max(1, len(mine[s]["scores"])) for s in seeds]
    played = sum(v for s in seeds for v in mine[s]["played"].values()) / max(
        1, sum(len(mine[s]["played"]) for s in seeds))
    control_mean = sum(v for s in seeds for v in control[s]["scores"].values()) / max(
        1, sum(len(control[s]["scores"]) for s in seeds))
    return {"seeds": len(seeds), "items": len(items), "method_mean": sum(per_seed) / len(per_seed),
            "method_sd": stats.sample_sd(per_seed), "played": 100 * played, "control_mean": control_mean,
            "gain": interval.mean, "low": interval.low, "high": interval.high,
            "sign_flip_p": stats.sign_flip_test(per_item).p_value, "wilcoxon_p": stats.wilcoxon_test(per_item).p_value,
            "detectable": stats.detectable_effect(stats.sample_sd(per_item), len(items)),
            "better": sum(d > 0 for d in per_item), "worse": sum(d < 0 for d in per_item),
            "failed": any(mine[s].get("failed") for s in seeds),
            "added": any(mine[s].get("added") or control[s].get("added") for s in seeds)}


def comparisons(results: dict, settings, splits: dict) -> dict:
    """(method, setting) -> comparison, with ``holm_p`` over the primary settings' family."""
    out = {}
    for (method, setting), mine in results.items():
        if method == CONTROL or (CONTROL, setting) not in results:
            continue
        split = next(s.split for s in settings if s.name == setting)
        row = compare(mine, results[(CONTROL, setting)], splits["games"][split].get("clusters", {}))
        if row is not None:
            row["primary"] = next(s.primary for s in settings if s.name == setting)
            out[(method, setting)] = row
    family = {key: row["sign_flip_p"] for key, row in out.items() if row["primary"] and key[0] != WARM_UP}
    for key, p in stats.holm(family).items():
        out[key]["holm_p"] = p
    return out


def against_baseline(results: dict, settings, splits: dict, baselines, family) -> dict:
    """(method, baseline, setting) -> the paired comparison of each method of ``family`` with
    each of ``baselines`` (e.g. each trainer against its own warm-up, ``sft``; or against two
    imitation controls) on the primary settings, with ``holm_p`` over exactly those
    comparisons: a study's primary test, declared before its run."""
    out = {}
    for method in family:
        for baseline in baselines:
            for setting in (s for s in settings if s.primary):
                mine, base = results.get((method, setting.name)), results.get((baseline, setting.name))
                if mine is None or base is None:
                    continue
                row = compare(mine, base, splits["games"][setting.split].get("clusters", {}))
                if row is not None:
                    out[(method, baseline, setting.name)] = row
    for key, p in stats.holm({key: row["sign_flip_p"] for key, row in out.items()}).items():
        out[key]["holm_p"] = p
    return out


def against_report(out: Path, settings, splits: dict, baselines, family) -> str:
    """``protocol-report--against-A+B.md``: the family against the baselines (see
    :func:`against_baseline`); the protocol's own report is not touched."""
    out = Path(out)
    rows = against_baseline(load_results(out), settings, splits, baselines, family)
    missing = [f"{m} vs {b}" for m in family for b in baselines if not any(k[:2] == (m, b) for k in rows)]
    lines = [f"# Each method against {' and '.join(f'`{b}`' for b in baselines)} (test split; Holm over the "
             f"{len(rows)} comparisons below)", "",
             "Per item: method − baseline, mean over the seeds both have; p: exact two-sided sign-flip over "
             "the items; Holm over this table's rows only; interval: 95 % bootstrap clustered by item and seed.", "",
             "| method | against | setting | seeds | items | method (± sd over seeds) | baseline | change [95 %] "
             "| better/worse | sign-flip p | Holm p |", "|" + "---|" * 11]
    for (method, baseline, setting), r in sorted(rows.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])):
        mark = " ✓" if r["holm_p"] < ALPHA and r["gain"] > 0 else ""
        lines.append(f"| {method}{mark} | {baseline} | {setting} | {r['seeds']} | {r['items']} | "
                     f"{r['method_mean']:.1f} ± {r['method_sd']:.1f} | {r['control_mean']:.1f} | {r['gain']:+.1f} "
                     f"[{r['low']:+.1f}, {r['high']:+.1f}] | {r['better']}/{r['worse']} | {_p(r['sign_flip_p'])} | "
                     f"{_p(r['holm_p'])} |")
    if missing:
        lines += ["", f"No test results on a primary setting for: {', '.join(missing)}."]
    text = "\n".join(lines) + "\n"
    from playpen.files import write_text
    write_text(out / f"protocol-report--against-{'+'.join(baselines)}.md", text)
    return text


def forgetting(results: dict, settings) -> dict:
    """method -> [(setting, % played drop vs the warm-up, score change)] on games it did not train."""
    out: dict = {}
    for (method, setting), mine in results.items():
        base = results.get((WARM_UP, setting))
        game = next(s.game for s in settings if s.name == setting)
        if method in (WARM_UP,) or base is None or game in next(iter(mine.values())).get("trains", []):
            continue
        seeds = sorted(set(mine) & set(base))
        if not seeds:
            continue
        played = lambda rows: 100 * sum(v for s in seeds for v in rows[s]["played"].values()) / max(  # noqa: E731
            1, sum(len(rows[s]["played"]) for s in seeds))
        score = lambda rows: sum(v for s in seeds for v in rows[s]["scores"].values()) / max(  # noqa: E731
            1, sum(len(rows[s]["scores"]) for s in seeds))
        out.setdefault(method, []).append((setting, played(base) - played(mine), score(mine) - score(base)))
    return out


def load_forgetting(out: Path) -> dict:
    """method -> seed -> the forgetting stage's file (the base model: seed None)."""
    found: dict = {}
    for path in sorted(Path(out).glob(f"{FORGETTING_PREFIX}*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        found.setdefault(data["method"], {})[data["seed"]] = data
    return found


def forgetting_lines(out: Path) -> list[str]:
    """The report's table of the out-of-domain clemscore and the statscore, before -> after:
    against the base model (its one measurement) and against the warm-up of the same seeds
    (the change per seed, mean ± sd)."""
    found = load_forgetting(out)
    base = (found.pop("base", {}) or {}).get(None)
    if not found:
        return []
    warm = found.get(WARM_UP, {})
    first = base or next(iter(next(iter(found.values())).values()))
    games, instances = ", ".join(first["games"]), first["instances_per_experiment"] or "all"
    tasks = ", ".join(first["static_tasks"]) or "none"
    lines = ["", f"Forgetting beyond the protocol's games: the clemscore of the {first['set']} set's games no method "
                 f"trains ({games}; {instances} instance(s) per experiment: {first['num_episodes']} episodes, greedy) "
                 f"and the statscore ({tasks}: {first.get('num_questions', 0)} questions), before -> after, "
                 f"mean ± sd over seeds:", "",
             "| configuration | seeds | OOD clemscore: base -> after | warm-up -> after (change ± sd) "
             "| statscore: base -> after | warm-up -> after (change ± sd) |", "|" + "---|" * 6]
    if base is not None:
        lines.append(f"| base model | — | {base['clemscore']:.1f} | — | {_num(base.get('statscore'), 3)} | — |")
    order = [WARM_UP, CONTROL] + sorted(m for m in found if m not in (WARM_UP, CONTROL))
    for method in (m for m in order if m in found):
        by_seed = found[method]
        seeds = sorted(by_seed)
        cells = []
        for key, digits in (("clemscore", 1), ("statscore", 3)):
            values = [by_seed[s].get(key) for s in seeds]
            if None in values:
                cells += ["n/a", "n/a"]
                continue
            after = f"{sum(values) / len(values):.{digits}f} ± {stats.sample_sd(values):.{digits}f}"
            before = _num(base.get(key) if base else None, digits)
            cells.append(f"{before} -> {after}")
            paired = [s for s in seeds if s in warm and warm[s].get(key) is not None]
            if method == WARM_UP or not paired:
                cells.append("—")
                continue
            changes = [by_seed[s][key] - warm[s][key] for s in paired]
            warm_mean = sum(warm[s][key] for s in paired) / len(paired)
            mine = sum(by_seed[s][key] for s in paired) / len(paired)
            cells.append(f"{warm_mean:.{digits}f} -> {mine:.{digits}f} ({sum(changes) / len(changes):+.{digits}f} "
                         f"± {stats.sample_sd(changes):.{digits}f})")
        name = f"{method} (warm-up)" if method == WARM_UP else method
        if any(by_seed[s].get("failed") for s in seeds):
            name += " (failed: the warm-up's adapter)"
        lines.append(f"| {name} | {len(seeds)} | " + " | ".join(cells) + " |")
    return lines


def choice_lines(out: Path, splits: dict) -> list[str]:
    """The report's forced-choice table (``protocol_choice.py``): per configuration, mean ± sd
    over seeds of the accuracy of the most likely answer, the target's probability among the
    three, how often each position is chosen, and the targets chosen right at all of their
    positions; each method against the control item by item on the target's probability."""
    found: dict = {}
    for path in sorted(Path(out).glob(f"{CHOICE_PREFIX}*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        found.setdefault(data["method"], {})[data["seed"]] = data
    if not found:
        return []
    clusters = splits["games"]["referencegame"].get("clusters", {})

    def mean_sd(values: list[float], scale: float = 100.0) -> str:
        values = [scale * v for v in values]
        return f"{sum(values) / len(values):.1f}" + (f" ± {stats.sample_sd(values):.1f}" if len(values) > 1 else "")

    lines = ["", "Diagnostic: the referencegame follower's forced choice over the three answers (test; the "
                 "log-probability of `Answer: first|second|third` after the follower's prompt; chance: 33.3 % "
                 "accuracy and target probability; a position prior chooses one position far above a third):", "",
             "| configuration | seeds | items | accuracy % | P(target) % | chosen first / second / third % (seeds pooled) "
             "| targets right at every position | P(target) vs control: better/worse, sign-flip p |",
             "|" + "---|" * 8]
    order = ["base", WARM_UP, CONTROL] + sorted(m for m in found if m not in ("base", WARM_UP, CONTROL))
    control = found.get(CONTROL, {})
    for method in (m for m in order if m in found):
        by_seed = found[method]
        seeds = sorted(by_seed, key=lambda s: -1 if s is None else s)
        runs = [by_seed[s] for s in seeds]
        accuracy = [sum(r["correct"].values()) / len(r["correct"]) for r in runs]
        p_target = [sum(r["scores"].values()) / len(r["scores"]) for r in runs]
        chosen = [sum(1 for r in runs for c in r["choice"].values() if c == k) / sum(len(r["choice"]) for r in runs)
                  for k in (1, 2, 3)]
        right = []
        for r in runs:
            members: dict = {}
            for item, ok in r["correct"].items():
                members.setdefault(clusters.get(item, item), []).append(ok)
            right.append(f"{sum(all(m) for m in members.values())} of {len(members)}")
        versus = "—"
        paired = [s for s in seeds if s is not None and s in control]
        if method not in ("base", CONTROL) and paired:
            items = sorted(set.intersection(*(set(by_seed[s]["scores"]) & set(control[s]["scores"]) for s in paired)))
            per_item = [sum(by_seed[s]["scores"][i] - control[s]["scores"][i] for s in paired) / len(paired)
                        for i in items]
            versus = (f"{sum(d > 0 for d in per_item)}/{sum(d < 0 for d in per_item)}, "
                      f"{_p(stats.sign_flip_test(per_item).p_value)}")
        name = "base model" if method == "base" else f"{method} (warm-up)" if method == WARM_UP else method
        lines.append(f"| {name} | {'—' if seeds == [None] else len(seeds)} | {len(runs[0]['scores'])} | "
                     f"{mean_sd(accuracy)} | {mean_sd(p_target)} | "
                     f"{' / '.join(f'{100 * c:.0f}' for c in chosen)} | {' / '.join(right)} | {versus} |")
    return lines


def retention_lines(out: Path) -> list[str]:
    """The report's retention table (``protocol_retention.py``): per configuration, its final
    adapter's mean log-probability per token of the base model's replies (mean over prompts,
    then over seeds), the change from the warm-up of the same seeds, and against the control:
    per prompt the method minus the control averaged over the seeds both have, prompts that
    rose/fell, the paired sign-flip p. With checkpoints kept, each method's mean by step."""
    found: dict = {}
    for path in sorted(Path(out).glob(f"{RETENTION_PREFIX}*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        found.setdefault(data["method"], {}).setdefault(data["seed"], {})[data["step"]] = data
    if not found:
        return []
    final = {method: {seed: steps[max(steps, key=lambda s: -1 if s is None else s)] for seed, steps in by_seed.items()}
             for method, by_seed in found.items()}
    mean = lambda values: sum(values) / len(values)  # noqa: E731
    control = final.get(CONTROL, {})
    lines = ["", "Retention: the mean log-probability per token of the base model's greedy first-turn replies to "
                 "prompts of games and roles no method trains (`retention-prompts--*.json`), under each final "
                 "adapter; mean over prompts, then seeds; per prompt method − control averaged over seeds, exact or "
                 "Monte Carlo sign-flip:", "",
             "| configuration | seeds | prompts | log-prob/token | change from the warm-up | vs control: rose/fell, "
             "sign-flip p |", "|" + "---|" * 6]
    order = [BASE, WARM_UP, CONTROL] + sorted(m for m in final if m not in (BASE, WARM_UP, CONTROL))
    for method in (m for m in order if m in final):
        by_seed = final[method]
        seeds = sorted(by_seed, key=lambda s: -1 if s is None else s)
        runs = [by_seed[s] for s in seeds]
        change = [mean(list(r["change"].values())) for r in runs if r.get("change")]
        versus = "—"
        paired = [s for s in seeds if s is not None and s in control]
        if method not in (BASE, CONTROL) and paired:
            items = sorted(set.intersection(*(set(by_seed[s]["logprobs"]) & set(control[s]["logprobs"])
                                              for s in paired)))
            per_item = [mean([by_seed[s]["logprobs"][i] - control[s]["logprobs"][i] for s in paired]) for i in items]
            versus = (f"{mean(per_item):+.4f}: {sum(d > 0 for d in per_item)}/{sum(d < 0 for d in per_item)}, "
                      f"{_p(stats.sign_flip_test(per_item).p_value)}")
        name = "base model" if method == BASE else f"{method} (warm-up)" if method == WARM_UP else method
        if any(r.get("failed") for r in runs):
            name += " (failed: the warm-up's adapter)"
        lines.append(f"| {name} | {'—' if seeds == [None] else len(seeds)} | {len(runs[0]['logprobs'])} | "
                     f"{mean([mean(list(r['logprobs'].values())) for r in runs]):.4f} | "
                     f"{f'{mean(change):+.4f}' if change and method != WARM_UP else '—'} | {versus} |")
    for method in (m for m in order if m in found and m != BASE):
        steps = sorted({step for by_step in found[method].values() for step in by_step})
        if len(steps) > 1:
            points = [(step, [by_step[step] for by_step in found[method].values() if step in by_step]) for step in steps]
            lines.append(f"- {method} by checkpoint (step: log-prob/token, seeds): " + ", ".join(
                f"{step}: {mean([mean(list(r['logprobs'].values())) for r in runs]):.4f} ({len(runs)})"
                for step, runs in points))
    return lines


def _num(value, digits: int) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def consistency(results: dict, settings, splits: dict) -> dict:
    """method -> per seed (targets whose every item scored > 0, targets) on the settings
    whose items cluster (referencegame: a target at its three positions)."""
    out: dict = {}
    for setting in settings:
        clusters = splits["games"][setting.split].get("clusters")
        if not clusters:
            continue
        for (method, name), by_seed in sorted(results.items()):
            if name != setting.name:
                continue
            for seed, data in sorted(by_seed.items()):
                members: dict = {}
                for item, score in data["scores"].items():
                    members.setdefault(clusters.get(item, item), []).append(score)
                out.setdefault(method, []).append((sum(all(v > 0 for v in m) for m in members.values()),
                                                   len(members)))
    return out


def warm_up_lines(results: dict) -> list[str]:
    """Per seed, the warm-up's dev curve (from its test result files) and where it stopped; a
    best chunk that was the last one trained is flagged: that warm-up may not have converged."""
    curves = {seed: data for (method, _), by_seed in results.items() if method == WARM_UP
              for seed, data in by_seed.items() if data.get("warm_up_curve")}
    if not curves:
        return []
    lines = ["", "Warm-ups (dev score after each chunk of SFT steps; the test played the best chunk):"]
    for seed, data in sorted(curves.items()):
        curve = data["warm_up_curve"]
        points = ", ".join(f"{p['step']}: {p['dev']:.1f}" for p in curve)
        note = (" — the best chunk is the last one trained: capped by --warmup-max-chunks while still improving, "
                "so this warm-up may not have converged" if curve[-1]["step"] == data["steps"] else "")
        lines.append(f"- seed {seed}: tested at {data['steps']} steps ({points}){note}")
    return lines


def read_dev_log(out: Path) -> list[dict]:
    """The rows of ``dev-log.jsonl`` (every dev evaluation, in order); [] before the first."""
    path = Path(out) / "dev-log.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()] \
        if path.exists() else []


def dev_configurations(out: Path, results: dict) -> list[str]:
    """Every configuration tried on dev (method, fingerprint, options), from dev-log.jsonl, with
    its mean dev score at the full budget and whether it went on to the test split (a
    configuration screened with --dev-only did not); `results`: :func:`load_results`."""
    tested = {(data["method"], data.get("fingerprint")) for by_seed in results.values() for data in by_seed.values()}
    seen = {}
    for row in read_dev_log(out):
        entry = seen.setdefault((row["method"], row["fingerprint"]), (row.get("options", {}), set(), {}))
        entry[1].add(row["seed"])
        if row.get("fraction") == 1.0 and row.get("dev_mean") is not None:
            entry[2][row["seed"]] = row["dev_mean"]

    def outcome(method, key, finals):
        dev = f"; dev at the full budget {sum(finals.values()) / len(finals):.1f}" if finals else ""
        if method == WARM_UP:
            return dev + "; tested from its best chunk"
        return dev + ("; tested" if (method, key) in tested else "; dev only, never tested")

    return [f"- {method} `{key}` (seeds {', '.join(map(str, sorted(seeds)))}): "
            + ", ".join(f"{k}={v}" for k, v in sorted(options.items())
                        if k not in ("models_dir", "init_adapter", "overwrite", "evaluate", "resume"))
            + outcome(method, key, finals)
            for (method, key), (options, seeds, finals) in seen.items()]


def dev_curves(out: Path) -> dict:
    """(method, setting) -> [(fraction, mean dev score over seeds)]; the warm-up's dev is fraction 0."""
    rows = read_dev_log(out)
    if not rows:
        return {}
    start: dict = {}
    best: dict = {}
    for row in rows:  # each seed's warm-up: its best chunk (the methods' start; ties: the earliest) is 0 %
        if row["method"] == WARM_UP and row.get("dev_mean", 0) > best.get(row["seed"], -math.inf):
            best[row["seed"]], start[row["seed"]] = row.get("dev_mean", 0), row["dev"]
    points: dict = {}
    for row in rows:
        if row["method"] == WARM_UP:
            continue
        for setting, summary in row["dev"].items():
            points.setdefault((row["method"], setting), {}).setdefault(row["fraction"], []).append(summary["mean"])
            if row["seed"] in start and setting in start[row["seed"]]:
                points[(row["method"], setting)].setdefault(0.0, []).append(start[row["seed"]][setting]["mean"])
    return {key: sorted((f, sum(v) / len(v)) for f, v in by.items()) for key, by in points.items()}


def _p(value: float | None) -> str:
    return "—" if value is None else (f"{value:.4f}" if value >= 1e-4 else f"{value:.1e}")


def build_report(out: Path, methods: dict, settings, splits: dict) -> str:
    out = Path(out)
    results = load_results(out)
    if not results:
        return "no protocol results yet"
    rows = comparisons(results, settings, splits)
    lines = ["# The learning protocol: each method against continued SFT (test split)", "",
             f"Per item: method − control, mean over shared seeds; p: exact two-sided sign-flip over the items; "
             f"Holm over methods × primary settings; interval: 95 % bootstrap clustered by item and seed; "
             f"detectable: the effect a paired test on these items detects at α {ALPHA}, power 0.8. "
             f"(added): a setting the finished configurations played on test after their selection "
             f"(`--add-settings`), in the Holm family like the others.", "",
             "| method | setting | seeds | items | method (± sd over seeds) | played % | control | gain [95 %] "
             "| better/worse | sign-flip p | Holm p | Wilcoxon p | detectable |", "|" + "---|" * 13]
    ordered = sorted(rows.items(), key=lambda kv: (not kv[1]["primary"], kv[0][1], -kv[1]["gain"]))
    for (method, setting), r in ordered:
        mark = " ✓" if r.get("holm_p", 1.0) < ALPHA and r["gain"] > 0 else ""
        detectable = f"{r['detectable']:.1f}" if r["detectable"] > 0 else "—"  # no spread: not estimable
        if r["failed"]:
            mark += " (failed: the warm-up unchanged)"
        kind = ("" if r["primary"] else " (diagnostic)") + (" (added)" if r["added"] else "")
        lines.append(f"| {method}{mark} | {setting}{kind} | {r['seeds']} | "
                     f"{r['items']} | {r['method_mean']:.1f} ± {r['method_sd']:.1f} | {r['played']:.0f} | "
                     f"{r['control_mean']:.1f} | {r['gain']:+.1f} "
                     f"[{r['low']:+.1f}, {r['high']:+.1f}] | {r['better']}/{r['worse']} | {_p(r['sign_flip_p'])} | "
                     f"{_p(r.get('holm_p'))} | {_p(r['wilcoxon_p'])} | {detectable} |")
    lines += ["", f"Forgetting (games a method did not train; against the warm-up; more than {MAX_PLAYED_DROP:.0f} "
                  f"points of % played lost is a miss):"]
    for method, found in sorted(forgetting(results, settings).items()):
        worst = max(found, key=lambda f: f[1])
        cells = "; ".join(f"{s}: played {0.0 - d:+.1f}, score {c + 0.0:+.1f}" for s, d, c in found)
        lines.append(f"- {method}: {'MISS' if worst[1] > MAX_PLAYED_DROP else 'kept'} ({cells})")
    lines += forgetting_lines(out)
    consistent = consistency(results, settings, splits)
    if consistent:
        lines += ["", "Diagnostic: referencegame targets named correctly at every grid position (test; a "
                      "position prior cannot do it):"]
        lines += [f"- {method}: {' / '.join(f'{n} of {total}' for n, total in counts)} (seed by seed)"
                  for method, counts in sorted(consistent.items())]
    lines += choice_lines(out, splits)
    lines += retention_lines(out)
    lines += warm_up_lines(results)
    lines += ["", "Configurations tried on dev:", *(dev_configurations(out, results) or ["- none logged"]), ""]
    lines += ["Methods: " + "; ".join(f"**{n}**: {m.description}" for n, m in methods.items()), ""]
    text = "\n".join(lines)
    from playpen.files import write_text
    write_text(out / "protocol-report.md", text)
    plot(rows, dev_curves(out), settings, out)
    return text


def plot(rows: dict, curves: dict, settings, out: Path) -> None:
    """protocol-gains.png: per primary setting, each method's gain over the control with its
    interval, one row per method, sorted; protocol-curves.png: dev score over the budget."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    primary = [s.name for s in settings if s.primary]
    shown = [s for s in primary if any(k[1] == s for k in rows)]
    if shown:
        height = max(2.5, 0.45 * max(sum(k[1] == s for k in rows) for s in shown) + 1.2)
        columns = min(2, len(shown))
        grid = math.ceil(len(shown) / columns)
        fig, axes = plt.subplots(grid, columns, figsize=(6 * columns, height * grid), squeeze=False)
        for ax in axes.flat[len(shown):]:
            ax.axis("off")
        for ax, setting in zip(axes.flat, shown):
            found = sorted(((m, r) for (m, s), r in rows.items() if s == setting), key=lambda mr: mr[1]["gain"])
            ys = range(len(found))
            gains = [r["gain"] for _, r in found]
            errors = [[r["gain"] - r["low"] for _, r in found], [r["high"] - r["gain"] for _, r in found]]
            colors = ["tab:green" if r.get("holm_p", 1) < ALPHA and r["gain"] > 0 else "tab:gray" for _, r in found]
            ax.errorbar(gains, list(ys), xerr=errors, fmt="none", ecolor="black", capsize=3)
            ax.scatter(gains, list(ys), c=colors, zorder=3)
            ax.axvline(0, color="tab:red", linewidth=1)
            ax.set_yticks(list(ys), [f"{m} (warm-up)" if m == WARM_UP else m for m, _ in found], fontsize=8)
            ax.set_title(f"{setting}: gain over continued SFT", fontsize=9)
            ax.set_xlabel("score points (test, 95 % interval)", fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "protocol-gains.png", dpi=100)
        plt.close(fig)
    curved = [s for s in primary if any(k[1] == s for k in curves)]  # an added setting has no dev curve
    if curved:
        fig, axes = plt.subplots(1, len(curved), figsize=(4.2 * len(curved), 3.2), squeeze=False)
        for ax, setting in zip(axes[0], curved):
            for (method, s), points in sorted(curves.items()):
                if s == setting:
                    ax.plot([100 * f for f, _ in points], [v for _, v in points], marker="o", label=method)
            ax.set_title(f"{setting} (dev)", fontsize=9)
            ax.set_xlabel("% of the budget", fontsize=8)
            if ax.lines:
                ax.legend(fontsize=6)
        fig.tight_layout()
        fig.savefig(out / "protocol-curves.png", dpi=100)
        plt.close(fig)
