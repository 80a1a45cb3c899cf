"""Superseded with benchmarks/learning.py by benchmarks/protocol.py and protocol_report.py (exact
sign-flip p and clustered intervals of playpen.evaluation.statistics instead of the paired
bootstrap below); kept to rebuild learning.py's published files.

The comparison's table, target checks and PNG, built only from the cached method results
(``learning-<method>.json``) so that they can be rebuilt at any time, on any machine."""
from __future__ import annotations

import json
from pathlib import Path

GAIN = 10.0       # target A: quality points over the SFT warm-up, held out
MAX_DROP = 10.0   # target B: % played that a game a method did not train may lose


WIN_SETTING = "adversarial_taboo/attacker"  # the measure there: the attacker's win rate


def attacker_win_rate(run_dir: Path) -> float | None:
    """% of ALL episodes (aborted ones included) that the Attacker won, from the records'
    ``scores.json``; None when the folder holds no episode."""
    wins = episodes = 0
    for path in Path(run_dir).rglob("scores.json"):
        try:
            scores = json.loads(path.read_text()).get("episode scores", {})
        except (OSError, json.JSONDecodeError):
            continue
        episodes += 1
        wins += scores.get("Attacker Win") == 1
    return round(100 * wins / episodes, 2) if episodes else None


def episode_scores(run_dir: Path) -> dict:
    """Every episode's main score by ``<experiment>/<instance folder>`` (None: aborted), from
    the records' ``scores.json``: what the intervals of the gains are computed from."""
    out = {}
    for path in sorted(Path(run_dir).rglob("scores.json")):
        try:
            scores = json.loads(path.read_text()).get("episode scores", {})
        except (OSError, json.JSONDecodeError):
            continue
        main = scores.get("Main Score")
        aborted = scores.get("Aborted") == 1 or main is None or main != main  # NaN: not scored
        out[f"{path.parent.parent.name}/{path.parent.name}"] = None if aborted else float(main)
    return out


BOOTSTRAP_RESAMPLES = 2000


def gain_interval(mine: dict, base: dict, seed: int = 0) -> tuple | None:
    """The 95 % interval of a quality gain over ``base`` (both: :func:`episode_scores` of the
    same held-out instances), by a paired bootstrap over the instances: each resample draws
    instances with replacement and compares the mean score of the played episodes in it.
    None when fewer than two instances are in both."""
    import random
    keys = sorted(set(mine) & set(base))
    if len(keys) < 2:
        return None
    rng = random.Random(seed)

    def quality(scores, drawn):
        played = [scores[k] for k in drawn if scores[k] is not None]
        return sum(played) / len(played) if played else None

    gains = []
    for _ in range(BOOTSTRAP_RESAMPLES):
        drawn = [keys[rng.randrange(len(keys))] for _ in keys]
        a, b = quality(mine, drawn), quality(base, drawn)
        if a is not None and b is not None:
            gains.append(a - b)
    if len(gains) < BOOTSTRAP_RESAMPLES // 2:
        return None
    gains.sort()
    return gains[int(0.025 * len(gains))], gains[int(0.975 * len(gains)) - 1]


def method_label(learner: str, name: str) -> str:
    """The label of a method's evaluation runs (every method but the baseline starts from SFT)."""
    return learner + {"baseline": "+baseline", "sft": "+sft"}.get(name, f"+sft+{name}")


def setting_run_name(label: str, setting: str) -> str:
    """The results folder of one evaluation setting of a labelled run."""
    return f"{label}--{setting.replace('/', '-')}"


def load_results(out: Path, names) -> dict:
    """The cached results; an attacker win rate missing from an older cache entry is read
    from its records (``learning/results/``) when they are here, and kept in the cache."""
    results = {}
    for name in names:
        path = Path(out) / f"learning-{name}.json"
        if not path.exists():
            continue
        data = results[name] = json.loads(path.read_text())
        changed = False
        for setting, row in data.get("settings", {}).items():
            wants_rate = setting == WIN_SETTING and "win_rate" not in row
            if not wants_rate and "scores" in row:
                continue
            pattern = setting_run_name(method_label("*", name), setting)
            found = sorted((Path(out) / "learning" / "results").glob(pattern))
            if not found:
                continue
            rate = attacker_win_rate(found[0]) if wants_rate else None
            if rate is not None:
                row["win_rate"], changed = rate, True
            scores = episode_scores(found[0]) if "scores" not in row else None
            if scores:
                row["scores"], changed = scores, True
        if changed:
            path.write_text(json.dumps(data, indent=2) + "\n")
    return results


def gains_markdown(results: dict, settings) -> str:
    """Each method's quality gain over SFT per setting with its 95 % interval (paired
    bootstrap over the held-out instances; settings without per-episode scores: the gain alone)."""
    sft = results.get("sft")
    if sft is None:
        return "- no SFT warm-up result yet"
    head = "| method | " + " | ".join(s for s in settings if s != WIN_SETTING) + " |"
    lines = [head, "|" + "---|" * (1 + len([s for s in settings if s != WIN_SETTING]))]
    for name, data in results.items():
        if name in ("baseline", "sft") or data.get("failed"):
            continue
        cells = []
        for setting in settings:
            if setting == WIN_SETTING:
                continue
            mine, base = data["settings"].get(setting) or {}, sft["settings"].get(setting) or {}
            if mine.get("quality") is None or base.get("quality") is None:
                cells.append("n/a")
                continue
            gain = mine["quality"] - base["quality"]
            interval = gain_interval(mine.get("scores") or {}, base.get("scores") or {})
            cells.append(f"{gain:+.1f}" + (f" [{interval[0]:+.1f}, {interval[1]:+.1f}]" if interval else ""))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(row: dict | None) -> str:
    if row is None:
        return "—"
    quality = "n/a" if row["quality"] is None else f"{row['quality']:.1f}"
    wins = f" (wins {row['win_rate']:.0f} %)" if row.get("win_rate") is not None else ""
    return f"{row['percent_played']:.0f} / {quality}{wins}"


def _game(setting: str) -> str:
    return setting.split("/")[0]


def targets(results: dict, settings) -> tuple[list[str], list[str]]:
    """Target A (gains over SFT) and B (format kept on untrained games), as lines."""
    sft = results.get("sft")
    if sft is None:
        return ["target A: no SFT warm-up result yet"], ["target B: no SFT warm-up result yet"]
    lines_a, lines_b = [], []
    for name, data in results.items():
        if name in ("baseline", "sft"):
            continue
        if data.get("failed"):
            lines_a.append(f"- {name}: not met (the method failed before its evaluation: {data['failed']})")
            lines_b.append(f"- {name}: not evaluated (failed)")
            continue
        gains = {}
        for setting in settings:
            mine, base = data["settings"].get(setting), sft["settings"].get(setting)
            key = "win_rate" if setting == WIN_SETTING else "quality"  # the measure per game
            if mine and base and mine.get(key) is not None and base.get(key) is not None:
                gains.setdefault(_game(setting), []).append((mine[key] - base[key], setting))
        won = sorted(g for g, values in gains.items() if max(values)[0] >= GAIN)
        best = ", ".join(f"{max(v)[1]} {max(v)[0]:+.1f}" for g, v in sorted(gains.items()))
        lines_a.append(f"- {name}: {'MET' if len(won) >= 2 else 'not met'} "
                       f"(≥ +{GAIN:.0f} on {len(won)} game(s){': ' + ', '.join(won) if won else ''}; best per game: "
                       f"{best or 'n/a'})")
        drops = []
        for setting in settings:
            if _game(setting) in data.get("trains", []):
                continue
            mine, base = data["settings"].get(setting), sft["settings"].get(setting)
            if mine and base:
                drops.append((base["percent_played"] - mine["percent_played"], setting))
        worst = max(drops) if drops else None
        if worst is None:
            lines_b.append(f"- {name}: no untrained game evaluated")
        else:
            lines_b.append(f"- {name}: {'MET' if worst[0] <= MAX_DROP else 'not met'} (largest % played drop on "
                           f"an untrained game: {worst[0]:+.1f} in {worst[1]})")
    return lines_a, lines_b


def table_markdown(results: dict, settings) -> str:
    head = "| method | train s | steps | " + " | ".join(settings) + " |"
    rule = "|" + "---|" * (3 + len(settings))
    lines = [head, rule]
    for name, data in results.items():
        cells = (["failed"] * len(settings) if data.get("failed")
                 else [_cell(data["settings"].get(s)) for s in settings])
        lines.append(f"| {name} | {data.get('train_seconds', 0):.0f} | {data.get('steps', 0)} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def answers_markdown(results: dict) -> str:
    lines = []
    for name, data in results.items():
        for setting, counts in data.get("answers", {}).items():
            total = sum(counts.values()) or 1
            shown = ", ".join(f"{a} {100 * n / total:.0f}%" for a, n in counts.items())
            lines.append(f"- {name} ({setting}): {shown}")
    return "\n".join(lines)


def build_report(out: Path, names, methods: dict, settings) -> str:
    from playpen.files import write_text
    results = load_results(out, names)
    if not results:
        return "no cached results yet"
    lines_a, lines_b = targets(results, settings)
    text = "\n".join([
        "# Learning methods, held out (cells: % played / quality; adversarial_taboo: + the attacker's win rate "
        "over all episodes)", "",
        table_markdown(results, settings), "",
        "Methods: " + "; ".join(f"**{n}**: {d.get('description', '')}" for n, d in results.items()), "",
        f"Target A (≥ +{GAIN:.0f} quality over SFT on ≥ 2 games; adversarial_taboo: attacker win rate):", *lines_a, "",
        "Quality gains over SFT with 95 % intervals (paired bootstrap over the held-out instances, "
        f"{BOOTSTRAP_RESAMPLES} resamples; an interval that holds 0 is a gain the evaluation cannot tell from noise):",
        "", gains_markdown(results, settings), "",
        f"Target B (≤ {MAX_DROP:.0f} points of % played lost on games a method did not train):", *lines_b, "",
        "referencegame follower answers (with the programmatic giver; a constant answer scores 33.3):",
        answers_markdown(results) or "- none yet", ""])
    write_text(Path(out) / "learning-comparison.md", text)
    plot(results, settings, Path(out) / "learning-comparison.png")
    return text


def plot(results: dict, settings, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (bars, curves) = plt.subplots(1, 2, figsize=(13, 4.2), gridspec_kw={"width_ratios": [3, 2]})
    names = list(results)
    width = 0.8 / max(1, len(names))
    for i, name in enumerate(names):
        quality = [(results[name]["settings"].get(s) or {}).get("quality") or 0 for s in settings]
        bars.bar([x + i * width for x in range(len(settings))], quality, width, label=name)
    bars.set_xticks([x + 0.4 - width / 2 for x in range(len(settings))],
                    [s.replace("/", "\n") for s in settings], fontsize=8)
    bars.set_ylabel("quality (held out)")
    bars.set_ylim(0, 110)
    bars.legend(fontsize=7, ncol=3, loc="upper right")
    for name in names:
        log = results[name].get("log") or []
        key = next((k for k in ("rollout/reward_mean", "train/rewards/margins", "train/loss")
                    if any(k in row for row in log)), None)
        if key is None:
            continue
        xs = [row["step"] for row in log if key in row]
        ys = [row[key] for row in log if key in row]
        curves.plot(xs, ys, label=f"{name}: {key}")
    curves.set_xlabel("step")
    curves.set_title("training curves (each method's own signal)", fontsize=9)
    if curves.lines:
        curves.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
