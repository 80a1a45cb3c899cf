"""`playpen eval`: the clemscore table equals `clem score` + `clem eval`; adapters get
their own results folder; a registered peft_model plays under `clem run`; user errors."""
import csv
import json
import math
import re

import pytest
from click.testing import CliRunner

from playpen.cli import cli
from playpen.evaluation import GameScore, table_from_scores
from playpen.models import adapter_tag


def invoke(*args):
    return CliRunner().invoke(cli, list(args))


def test_table_arithmetic_matches_clem_eval_rules():
    scores = [{"game": "a", "Aborted": 0, "Main Score": 100}, {"game": "a", "Aborted": 1, "Main Score": math.nan},
              {"game": "b", "Aborted": 1, "Main Score": math.nan}]
    table = table_from_scores("m", scores)
    a, b = table.games
    assert (a.percent_played, a.quality, a.clemscore) == (50.0, 100.0, 50.0)
    assert b.percent_played == 0.0 and math.isnan(b.quality) and b.clemscore == 0.0
    # games average unweighted; a game without played episodes drops out of the quality mean
    assert table.overall.percent_played == 25.0 and table.overall.quality == 100.0
    assert table.clemscore == 25.0
    assert "n/a" in table.to_text() and json.dumps(table.to_dict())


def test_the_tables_keep_their_columns_for_long_game_names():
    """A game name over 24 characters once pushed its row's numbers out from under their
    headers (issue 40): every number ends where its header ends, in the eval table and in
    the comparison of two runs."""
    from playpen.evaluation.compare import Change, Comparison
    long_name = "a_third_party_game_with_a_long_name_v2"
    scores = [{"game": long_name, "Aborted": 0, "Main Score": 80}, {"game": "taboo", "Aborted": 1, "Main Score": 0}]
    lines = table_from_scores("m", scores).to_text().splitlines()
    header, rows = lines[1], lines[2:]
    ends = [m.end() for m in re.finditer(r"episodes|% played|quality|clemscore", header)]
    for row in rows:
        assert [m.end() for m in re.finditer(r"\S+", row)][-4:] == ends, (header, row)
    change = Comparison("before", "after", (Change(f"{long_name} % played", 50.0, 75.0, 1), Change("clemscore", 10.0, 12.0)))
    lines = change.to_text().splitlines()
    ends = [m.end() for m in re.finditer(r"before|after|change", lines[2])]
    for row in lines[3:]:
        assert [m.end() for m in re.finditer(r"\S+", row)][-3:] == ends, (lines[2], row)


def test_adapter_tag_is_readable_and_folder_safe(tmp_path):
    path = tmp_path / "models" / "sft+lora" / "smol-135m" / "checkpoint-8"
    assert adapter_tag(path, "smol-135m") == "sft+lora-checkpoint-8"
    assert "/" not in adapter_tag(tmp_path / "x y" / "a", "m")


def test_eval_programmatic_equals_clem_score_and_eval(clem_workspace, monkeypatch, clem_here):
    monkeypatch.chdir(clem_workspace)
    result = invoke("eval", "-m", "programmatic", "-g", "referencegame", "-n", "1", "--json")
    assert result.exit_code == 0, result.output
    table = json.loads(result.stdout)
    assert table["run_name"] == "programmatic"
    assert table["games"][0]["num_episodes"] == 5  # 5 experiments x 1 instance
    run_dir = clem_workspace / "results" / "programmatic"
    assert (run_dir / "playpen-eval.json").exists() and (run_dir / "results.csv").exists()

    # the same episodes through clem's own score and eval commands give the same numbers
    clem_here(["score", "-g", "referencegame", "-r", "results"], cwd=clem_workspace)
    clem_here(["eval", "-r", "results"], cwd=clem_workspace)
    with open(clem_workspace / "results" / "results.csv") as f:
        row = next(r for r in csv.DictReader(f) if r[""] == "programmatic")
    assert float(row["referencegame, % Played"]) == table["games"][0]["percent_played"]
    assert float(row["referencegame, Quality Score"]) == table["games"][0]["quality"]
    assert float(row["-, clemscore"]) == table["clemscore"]


def test_eval_never_overwrites_earlier_results_silently(clem_workspace, monkeypatch):
    monkeypatch.chdir(clem_workspace)
    first = invoke("eval", "-m", "programmatic", "-g", "referencegame", "-n", "2")
    assert first.exit_code == 0, first.output
    results = clem_workspace / "results"

    def files():
        return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in results.rglob("*") if p.is_file()}
    before = files()
    assert len([p for p in before if p.name == "interactions.json"]) == 10

    again = invoke("eval", "-m", "programmatic", "-g", "referencegame", "-n", "1")
    assert again.exit_code == 2, again.output
    assert again.output == ("playpen: error: results/programmatic/referencegame already holds episodes of an "
                            "earlier evaluation: pass --name NEW to keep them or --overwrite to replace them\n")
    assert files() == before  # the first run's files untouched

    replaced = invoke("eval", "-m", "programmatic", "-g", "referencegame", "-n", "1", "--overwrite", "--json")
    assert replaced.exit_code == 0, replaced.output
    assert json.loads(replaced.stdout)["games"][0]["num_episodes"] == 5
    # the earlier episodes are gone: the folder holds exactly the episodes played now
    assert len(list((results / "programmatic" / "referencegame").rglob("interactions.json"))) == 5


@pytest.fixture(scope="module")
def lora_adapter(tmp_path_factory, tiny_model_dir):
    """A random (but valid) LoRA adapter for the tiny model, saved like a checkpoint."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    out = tmp_path_factory.mktemp("adapter") / "models" / "sft+lora" / "tiny-random" / "checkpoint-2"
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    peft = get_peft_model(model, LoraConfig(r=4, target_modules="all-linear", task_type="CAUSAL_LM"))
    torch.manual_seed(1)
    for name, p in peft.named_parameters():
        if "lora_B" in name:
            p.data.normal_()
    peft.save_pretrained(out)
    return out


def test_eval_adapter_gets_its_own_results_folder(tiny_workspace, lora_adapter):
    base = invoke("eval", "-m", "tiny-random", "-g", "referencegame", "-n", "1", "-L", "4")
    assert base.exit_code == 0, base.output
    adapted = invoke("eval", "-m", "tiny-random", "--adapter", str(lora_adapter), "-g", "referencegame",
                     "-n", "1", "-L", "4")
    assert adapted.exit_code == 0, adapted.output
    folders = sorted(p.name for p in (tiny_workspace / "results").iterdir())
    assert folders == ["tiny-random", "tiny-random+sft+lora-checkpoint-2"]
    info = json.loads((tiny_workspace / "results" / folders[1] / "playpen-eval.json").read_text())
    assert info["adapter"] == str(lora_adapter)
    interactions = next((tiny_workspace / "results" / folders[1]).rglob("interactions.json"))
    players = json.loads(interactions.read_text())["players"]
    assert players["Player 1"]["model_name"] == "tiny-random+sft+lora-checkpoint-2"


def test_registered_peft_model_plays_with_clem_run(toy_workspace, lora_adapter, tiny_model_dir, clem_here):
    """The documented way to name an adapter: a model_registry.json entry with peft_model.
    (A toy game of 4 instances: clem runs every instance of an experiment, referencegame's 18.)"""
    entries = json.loads((toy_workspace / "model_registry.json").read_text())
    entries.append({**entries[0], "model_name": "tiny-lora",
                    "model_config": {**entries[0]["model_config"], "peft_model": str(lora_adapter)}})
    (toy_workspace / "model_registry.json").write_text(json.dumps(entries))
    clem_here(["run", "-g", "sayword", "-m", "tiny-lora", "-l", "4", "-b", "4"], cwd=toy_workspace)
    episodes = list((toy_workspace / "results" / "tiny-lora" / "sayword").rglob("interactions.json"))
    assert len(episodes) == 4
    # and playpen eval accepts the registered name as well (replacing clem run's episodes)
    result = invoke("eval", "-m", "tiny-lora", "-g", "sayword", "-n", "1", "-L", "4", "--overwrite")
    assert result.exit_code == 0, result.output
    assert "tiny-lora" in result.output


@pytest.mark.parametrize("args, expected", [
    (["-m", "no-such-model"], "unknown model 'no-such-model'"),
    (["-m", "programmatic", "-g", "no-such-game"], "unknown game 'no-such-game'"),
    (["-m", "programmatic", "-g", "referencegame", "-i", "nope"], "has no in/nope.json"),
    (["-m", "programmatic", "--adapter", "does/not/exist"], "is not a folder"),
    (["-m", "programmatic", "-n", "0"], "--max-instances must be at least 1"),
])
def test_eval_user_errors(clem_workspace, monkeypatch, args, expected):
    monkeypatch.chdir(clem_workspace)
    result = invoke("eval", *args)
    assert result.exit_code == 2, result.output
    assert expected in result.output
    assert result.output.count("\n") == 1 and result.output.startswith("playpen: error:")
    assert not (clem_workspace / "results").exists()


def test_eval_adapter_without_adapter_config(tiny_workspace):
    (tiny_workspace / "not-an-adapter").mkdir()
    result = invoke("eval", "-m", "tiny-random", "--adapter", "not-an-adapter")
    assert result.exit_code == 2 and "no adapter_config.json" in result.output


def test_game_score_clemscore_of_unplayed_game_is_zero():
    assert GameScore("g", 3, 0.0, math.nan).clemscore == 0.0
