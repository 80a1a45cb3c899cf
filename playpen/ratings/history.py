"""Per-epoch snapshots of a run's ratings: saved as JSON, plotted as a PNG."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

from playpen.files import write_json
from playpen.ratings.elo import Elo
from playpen.ratings.matches import RatingError
from playpen.ratings.openskill import OpenSkill

HISTORY_FORMAT = "playpen-ratings"
HISTORY_VERSION = 1


class RatingHistory:
    """Snapshots of the ratings, one per epoch: ``snapshots`` is a list of
    ``{"epoch": int, "elo": {name: rating}, "openskill": {name: [mu, sigma]}}`` sorted by
    epoch. Recording an epoch again replaces its snapshot (a resumed run)."""

    def __init__(self):
        self.snapshots: list[dict] = []

    def record(self, epoch: int, elo: Union[Elo, Mapping[str, float], None],
               openskill: Union[OpenSkill, Mapping[str, Sequence[float]], None]) -> None:
        """Copy the current ratings (an :class:`Elo`/:class:`OpenSkill` or their
        ``ratings`` dicts) as the snapshot of ``epoch``."""
        if isinstance(epoch, bool) or not isinstance(epoch, int):
            raise RatingError(f"an epoch must be an integer, got {epoch!r}")
        elo_ratings = elo.ratings if isinstance(elo, Elo) else (elo or {})
        skill = openskill.ratings if isinstance(openskill, OpenSkill) else (openskill or {})
        snapshot = {"epoch": epoch,
                    "elo": {str(n): float(r) for n, r in elo_ratings.items()},
                    "openskill": {str(n): [float(v[0]), float(v[1])] for n, v in skill.items()}}
        self.snapshots = [s for s in self.snapshots if s["epoch"] != epoch] + [snapshot]
        self.snapshots.sort(key=lambda s: s["epoch"])

    def players(self) -> list[str]:
        """Every player named in any snapshot, in order of first appearance."""
        seen: dict[str, None] = {}
        for s in self.snapshots:
            for name in (*s["elo"], *s["openskill"]):
                seen.setdefault(name)
        return list(seen)

    def save(self, path: str | Path) -> Path:
        """Write the history as JSON, atomically."""
        return write_json(path, {"format": HISTORY_FORMAT, "version": HISTORY_VERSION,
                                 "snapshots": self.snapshots})

    @classmethod
    def load(cls, path: str | Path) -> "RatingHistory":
        """Read a history written by :meth:`save`; a missing or malformed file raises
        :class:`RatingError` naming it."""
        import json
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as e:
            raise RatingError(f"cannot read the rating history '{path}': {e.strerror or e}") from e
        except json.JSONDecodeError as e:
            raise RatingError(f"{path}:{e.lineno}: malformed JSON: {e.msg}") from e
        if not isinstance(data, dict) or data.get("format") != HISTORY_FORMAT \
                or not isinstance(data.get("snapshots"), list):
            raise RatingError(f"{path}: not a rating history (expected \"format\": \"{HISTORY_FORMAT}\")")
        history = cls()
        try:
            for s in data["snapshots"]:
                history.record(s["epoch"], s["elo"], s["openskill"])
        except (KeyError, TypeError, IndexError, ValueError) as e:
            raise RatingError(f"{path}: malformed snapshot: {e}") from e
        return history


def plot_ratings(history: RatingHistory, path_png: str | Path, title: Optional[str] = None) -> Path:
    """Draw the ratings over epochs into a PNG: Elo above, OpenSkill mu with a ±sigma band
    below; a player enters the plot at its first snapshot. Returns the path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not history.snapshots:
        raise RatingError("the rating history is empty: nothing to plot")
    path_png = Path(path_png)
    fig, (ax_elo, ax_skill) = plt.subplots(2, 1, figsize=(7, 5.6), sharex=True)
    for name in history.players():
        elo = [(s["epoch"], s["elo"][name]) for s in history.snapshots if name in s["elo"]]
        skill = [(s["epoch"], *s["openskill"][name]) for s in history.snapshots if name in s["openskill"]]
        line = None
        if elo:
            (line,) = ax_elo.plot(*zip(*elo), marker="o", markersize=3, label=name)
        if skill:
            epochs, mus, sigmas = zip(*skill)
            color = line.get_color() if line is not None else None
            (drawn,) = ax_skill.plot(epochs, mus, marker="o", markersize=3, color=color, label=name)
            ax_skill.fill_between(epochs, [m - s for m, s in zip(mus, sigmas)],
                                  [m + s for m, s in zip(mus, sigmas)],
                                  color=drawn.get_color(), alpha=0.15, linewidth=0)
    ax_elo.set_ylabel("Elo")
    ax_skill.set_ylabel("OpenSkill mu (± sigma)")
    ax_skill.set_xlabel("epoch")
    for ax in (ax_elo, ax_skill):
        ax.grid(alpha=0.3)
    # one legend: the colours are the same in both panels
    legend_ax = ax_elo if ax_elo.get_legend_handles_labels()[0] else ax_skill
    legend_ax.legend(fontsize=8, ncol=2 if len(history.players()) > 6 else 1)
    fig.suptitle(title or "ratings over epochs")
    fig.tight_layout()
    path_png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path_png, dpi=100)
    plt.close(fig)
    return path_png
