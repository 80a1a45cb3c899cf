"""Learning curves from a run's JSON log (``playpen-log.jsonl``).

The PNG shows, over optimizer steps, what is in the log: reward mean (overall and per
role), % played and % of groups dropped (no signal) for GRPO runs, the training loss for
SFT runs. The Agg backend is used, so no display is needed.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from playpen.errors import PlotError

LOG_FILE = "playpen-log.jsonl"
CURVE_FILE = "learning-curve.png"



def read_log(path: str | Path) -> list[dict]:
    """Train-step records of a log, one per step (a resumed run's later record wins)."""
    path = Path(path)
    if path.is_dir():
        path = path / LOG_FILE
    if not path.is_file():
        raise PlotError(f"no training log at {path} (a run folder holds {LOG_FILE})")
    by_step: dict[int, dict] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            # a crash can cut the last line short; any other bad line is a real problem
            if number == len(path.read_text(encoding="utf-8").splitlines()):
                break
            raise PlotError(f"{path}:{number}: malformed JSON line: {e.msg}") from e
        if record.get("event") == "train_step":
            by_step[int(record["step"])] = record
    return [by_step[s] for s in sorted(by_step)]


def _series(records: list[dict], key: str) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for r in records:
        value = r.get(key)
        if isinstance(value, (int, float)):
            xs.append(r["step"])
            ys.append(float(value))
    return xs, ys


def plot_run(run: str | Path, out: Optional[str | Path] = None, title: Optional[str] = None) -> Path:
    """Draw the learning curve of a run folder (or log file) into a PNG; returns its path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run = Path(run)
    records = read_log(run)
    if not records:
        raise PlotError(f"{run}: the log has no training steps yet")
    run_dir = run if run.is_dir() else run.parent
    out = Path(out) if out else run_dir / CURVE_FILE
    role_keys = sorted({k for r in records for k in r if k.startswith("reward/") and k.endswith("/mean")})
    has_reward = any(k in r for r in records for k in ("rollout/reward_mean",)) or role_keys
    has_played = any("rollout/percent_played" in r or "grpo/dropped_groups" in r for r in records)

    panels = (["reward"] if has_reward else []) + (["played"] if has_played else []) + ["loss"]
    fig, axes = plt.subplots(len(panels), 1, figsize=(7, 2.6 * len(panels)), sharex=True, squeeze=False)
    for ax, panel in zip(axes[:, 0], panels):
        if panel == "reward":
            ax.plot(*_series(records, "rollout/reward_mean"), label="all roles", linewidth=2)
            for key in role_keys:
                ax.plot(*_series(records, key), label=key.split("/")[1], linewidth=1)
            ax.set_ylabel("reward (mean)")
            ax.legend(fontsize=8)
        elif panel == "played":
            ax.plot(*_series(records, "rollout/percent_played"), color="tab:green", label="episodes played")
            steps, dropped = _series(records, "grpo/dropped_groups")
            if steps:  # GRPO groups without signal (all rewards equal): nothing learned from them
                ax.plot(steps, [100 * d for d in dropped], color="tab:gray", linestyle="--", label="groups dropped")
                ax.legend(fontsize=8)
            ax.set_ylabel("%")
            ax.set_ylim(-5, 105)
        else:
            ax.plot(*_series(records, "train/loss"), color="tab:red")
            ax.set_ylabel("loss")
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("optimizer step")
    fig.suptitle(title or f"{run_dir.parent.name}/{run_dir.name}")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
