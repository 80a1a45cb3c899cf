"""The wheel holds the package and only the package: the trainers (``playpen run sft`` after a
plain ``pip install .``), the builtin games' files, and nothing of the workspace around it (a
wheel built after a tournament in the repository root once shipped ``playpen-records/``)."""
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from playpen.training.catalog import TRAINERS

REPO_ROOT = Path(__file__).resolve().parents[1]


def build_wheel(source: Path, out: Path) -> Path:
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
                           "--no-index", "-q", "-w", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    wheels = list(out.glob("playpen-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_the_wheel_holds_the_package_and_nothing_of_the_workspace(tmp_path):
    source = tmp_path / "repo"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, source / name)
    shutil.copytree(REPO_ROOT / "playpen", source / "playpen",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
    # what a workspace in the repository root leaves beside the package
    stray = source / "playpen-records" / "tournament-20261126" / "episode_0"
    stray.mkdir(parents=True)
    (stray / "interactions.json").write_text("{}")
    (source / "playpen_notes").mkdir()
    (source / "playpen_notes" / "todo.txt").write_text("x")

    names = set(zipfile.ZipFile(build_wheel(source, tmp_path / "dist")).namelist())

    outside = sorted(n for n in names if not n.startswith("playpen/") and ".dist-info/" not in n)
    assert not outside, outside
    assert all(n.split("/")[0] == "playpen" or n.split("/")[0].endswith(".dist-info") for n in names)
    for entry in TRAINERS.values():  # every packaged trainer's module
        module = entry.target.partition(":")[0].replace(".", "/")
        assert f"{module}.py" in names or f"{module}/__init__.py" in names, entry.name
    games = source / "playpen" / "games" / "builtin"
    for game in ("referencegame", "taboo", "wordle"):
        assert f"playpen/games/builtin/{game}/clemgame.json" in names
        assert any(n.startswith(f"playpen/games/builtin/{game}/in/") for n in names)
    # every file of the package's source (games' instances and resources, judge prompts) is inside
    missing = sorted(str(p.relative_to(source)) for p in (source / "playpen").rglob("*")
                     if p.is_file() and str(p.relative_to(source)) not in names)
    assert not missing, missing
    assert any(p.name == "resources" for p in games.rglob("*"))  # the check above covered resources


def test_the_installed_wheel_runs_the_trainers_by_name_from_an_empty_folder(tmp_path):
    """A plain (non-editable) install: the trainers and the demo come from the package, not
    from a repository's examples/ (the demo once loaded examples/trl/ by path)."""
    source = tmp_path / "repo"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, source / name)
    shutil.copytree(REPO_ROOT / "playpen", source / "playpen",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
    wheel = build_wheel(source, tmp_path / "dist")
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target",
                           str(site), str(wheel)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}

    def run(*args):
        return subprocess.run([sys.executable, *args], cwd=empty, env=env, capture_output=True, text=True,
                              timeout=300)
    where = run("-c", "import playpen; print(playpen.__file__)")
    assert where.stdout.strip().startswith(str(site)), where.stdout + where.stderr
    listed = run("-m", "playpen", "run", "--list")
    assert listed.returncode == 0 and listed.stdout.split()[0] == "sft", listed.stderr
    shown = run("-m", "playpen", "run", "sft", "--help")
    assert shown.returncode == 0 and "Trainer SFTLoraTrainer (sft)" in shown.stdout, shown.stderr[-2000:]
    assert "playpen run sft -l smol-135m" in shown.stdout and "Outputs: " in shown.stdout  # its docs travel along
    demo = run("-m", "playpen.demo", "--help")
    assert demo.returncode == 0 and "--output-dir" in demo.stdout, demo.stderr[-2000:]
    assert list(empty.iterdir()) == []  # nothing written where it ran
