"""The code in docs/ runs as written: the trainer of docs/your-own-trainer.md, through
`playpen run`, on the tiny model and the toy game `sayword`."""
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from playpen.cli import cli

DOC = Path(__file__).resolve().parents[1] / "docs" / "your-own-trainer.md"


@pytest.fixture
def trainer_file(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 1, "the chapter holds exactly one complete trainer"
    path = tmp_path / "best_of_n.py"
    path.write_text(blocks[0], encoding="utf-8")
    return path


def test_the_chapters_trainer_trains_saves_logs_and_evaluates(toy_workspace, trainer_file, tiny_model_dir):
    from safetensors.torch import load_file
    result = CliRunner().invoke(cli, ["run", str(trainer_file), "-l", "tiny-random", "-T", "1.0", "-L", "4",
                                      "--games", "sayword", "--max-steps", "2", "--save-steps", "1",
                                      "--num-samples", "2", "--eval-max-instances", "1", "--eval-sets", "none",
                                      "--no-eval-static"])
    assert result.exit_code == 0, result.output
    run_dir = toy_workspace / "models" / "best-of-n" / "tiny-random"
    assert sorted(p.name for p in run_dir.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    before = load_file(tiny_model_dir / "model.safetensors")
    after = load_file(run_dir / "checkpoint-2" / "model.safetensors")
    assert any(not (before[k] == after[k]).all() for k in before), "training changed no parameter"
    steps = [json.loads(line) for line in (run_dir / "playpen-log.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps if s["event"] == "train_step"] == [1, 2]
    assert all(s["train/kept"] >= 1 for s in steps)
    assert "clemscore table for tiny-random+best-of-n" in result.output
    records = list((toy_workspace / "playpen-records" / "best-of-n").rglob("interactions.json"))
    assert len(records) == 2 * 2 * 2  # 2 steps x 2 instances x 2 samples


def test_the_chapters_trainer_lists_and_checks_its_options(toy_workspace, trainer_file):
    shown = CliRunner().invoke(cli, ["run", str(trainer_file), "--help"])
    assert shown.exit_code == 0 and "--num-samples" in shown.output and "--max-steps" in shown.output
    bad = CliRunner().invoke(cli, ["run", str(trainer_file), "-l", "tiny-random", "--num-samples", "1"])
    assert bad.exit_code == 2
    assert "option --num-samples: 1 is not valid" in bad.output


REPO = Path(__file__).resolve().parents[1]
LINKED_PAGES = ["README.md", "benchmarks/README.md", "benchmarks/results/LOG.md", *sorted(
    str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", LINKED_PAGES)
def test_every_relative_link_of_the_docs_names_a_file_that_exists(page):
    """A page moved or renamed leaves no dead link behind (web links are not followed)."""
    text = (REPO / page).read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # code blocks hold commands, not links
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    assert targets or page.startswith("docs/"), f"{page} links to nothing"
    dead = []
    for target in targets:
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = (REPO / page).parent.joinpath(path) if path else REPO / page
        if not file.exists() or (anchor and file.suffix == ".md" and anchor not in anchors(file)):
            dead.append(target)
    assert not dead, f"{page}: dead links {dead}"


def anchors(page: Path) -> set[str]:
    """The heading anchors GitHub makes: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
            for heading in re.findall(r"^#+ (.+)$", text, re.M)}


def test_the_readme_stays_a_front_door():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode("utf-8")) <= 12_500, "README.md grew past ~12 KB: move detail into docs/"
    for command in ("make demo", "make test"):
        assert command in readme and command.split()[1] + ":" in (REPO / "Makefile").read_text()


def test_own_games_picks_a_copy_by_path_as_clemcore_does(tmp_path, monkeypatch):
    """docs/own-games.md §5: `clem run -g '{"game_name": ..., "game_path": ...}'` picks the copy
    whose game_path is the string clemcore registered (the benchmark_path entry joined with the
    folder); another spelling of the same folder matches nothing. Checked with clemcore's own
    selector, the function `clem run` calls (issue 40: the doc once promised an absolute path)."""
    import shutil

    from clemcore.clemgame.registry import GameRegistry

    from playpen.registry import packaged_games_dir
    bench = tmp_path / "outside" / "bench"
    bench.mkdir(parents=True)
    shutil.copytree(packaged_games_dir() / "builtin" / "wordle", bench / "wordle")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "game_registry.json").write_text(json.dumps([{"benchmark_path": "../outside/bench"}]))
    monkeypatch.chdir(workspace)
    registry = GameRegistry.from_directories_and_cwd_files()
    listed = sorted({spec.game_path for spec in registry if spec.game_name == "wordle"})
    assert listed == ["../outside/bench/wordle"]  # what `clem list games -v` shows
    picked = registry.get_game_specs_that_unify_with('{"game_name": "wordle", "game_path": "../outside/bench/wordle"}',
                                                     verbose=False)
    assert [(s.game_name, s.game_path) for s in picked] == [("wordle", "../outside/bench/wordle")]
    for other_spelling in (str(bench / "wordle"), "../outside/bench/wordle/"):
        with pytest.raises(ValueError, match="No games found matching the game selector"):
            registry.get_game_specs_that_unify_with(json.dumps({"game_name": "wordle", "game_path": other_spelling}),
                                                    verbose=False)


# ----------------------------------------------------------------------------- trainers' own docs

def trainer_docs():
    """(name, class docstring) of every packaged trainer (the catalog's)."""
    import inspect

    from playpen.training.catalog import TRAINERS, trainer_class
    return [(name, inspect.getdoc(trainer_class(name)) or "") for name in TRAINERS]


def test_every_trainer_documents_its_command_and_outputs_in_its_class_docstring():
    """The wheel ships no examples/: each trainer's documentation is its class docstring."""
    missing = [name for name, doc in trainer_docs()
               if f"playpen run {name} -l " not in doc or "\nOutputs: " not in doc]
    assert not missing, f"class docstrings without `playpen run NAME -l ...` or an Outputs paragraph: {missing}"


def test_run_help_shows_each_trainers_example_commands():
    for name, doc in trainer_docs():
        shown = CliRunner().invoke(cli, ["run", name, "--help"])
        assert shown.exit_code == 0, shown.output
        commands = [line.strip() for line in doc.splitlines() if line.strip().startswith(f"playpen run {name} ")]
        assert commands and all(command in shown.output for command in commands), name
        assert "Outputs: " in shown.output and "Trainer options:" in shown.output, name


def test_the_package_sends_no_reader_to_examples():
    """examples/trl/ is not in the wheel: no docstring under playpen/ points there, except the
    catalog, which names the example file that runs each trainer."""
    pointing = [str(path.relative_to(REPO)) for path in sorted((REPO / "playpen").rglob("*.py"))
                if "examples/trl" in path.read_text(encoding="utf-8") and path.name != "catalog.py"]
    assert not pointing, f"files under playpen/ that point to examples/trl: {pointing}"
