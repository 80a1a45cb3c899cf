"""`playpen tournament`: a round robin on the tiny model with an adapter and the programmatic
player; records scorable by `clem score`; ratings; bad input is one line, exit 2, nothing written."""
import json

import pytest
from click.testing import CliRunner

from playpen.cli import cli


def invoke(*args):
    return CliRunner().invoke(cli, ["tournament", *args])


@pytest.fixture
def adapter(tiny_model_dir, toy_workspace):
    """A random (not identity) LoRA adapter trained on the tiny model."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    torch.manual_seed(1)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir),
                           LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False))
    model.save_pretrained(toy_workspace / "adapters" / "duo")
    return "adapters/duo"


def test_a_round_robin_writes_records_ratings_and_a_table(toy_workspace, adapter, clem_here):
    result = invoke("-m", "tiny-random", "-m", f"tiny-random+{adapter}", "-m", "programmatic", "-g", "relay",
                    "-n", "1", "-L", "6", "-o", "cup", "--bootstrap-samples", "50")
    assert result.exit_code == 0, result.output
    out = toy_workspace / "cup"
    names = ["tiny-random", "tiny-random+adapters-duo", "programmatic"]
    # 3 pairs x 2 seatings x 1 instance, each seating in its own clemcore model folder
    folders = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert folders == sorted(f"{a}--{b}" for a in names for b in names if a != b)
    episodes = list(out.glob("*/relay/*/instance_*/interactions.json"))
    assert len(episodes) == 6
    lines = [json.loads(x) for x in (out / "matches.jsonl").read_text().splitlines()]
    assert len(lines) == 6 and {tuple(x["seats"]) for x in lines} == {("Speaker", "Listener")}
    assert {tuple(x["players"]) for x in lines} == {(a, b) for a in names for b in names if a != b}
    ratings = json.loads((out / "ratings.json").read_text())
    assert set(ratings["elo"]) == set(ratings["bradley_terry"]) == set(names) and ratings["instances"] == 1
    for r in [*ratings["elo"].values(), *ratings["bradley_terry"].values()]:
        assert r["low"] <= r["rating"] <= r["high"]
    table = (out / "ratings.md").read_text()
    assert table.splitlines()[0].startswith("| player | Bradley–Terry | 95 % CI") and all(n in table for n in names)
    assert table.strip() in result.output and (out / "ratings.png").stat().st_size > 0
    assert not (out / ".seatings").exists()
    # clemcore's own scorer reads the records
    clem_here(["score", "-g", "relay", "-r", str(out)], cwd=toy_workspace)
    assert len(list(out.glob("*/relay/*/instance_*/scores.json"))) == 6


@pytest.mark.parametrize("args, message", [
    (["-m", "tiny-random", "-g", "relay"], "at least two players"),
    (["-m", "tiny-random", "-m", "tiny-random", "-g", "relay"], "named twice"),
    (["-m", "tiny-random", "-m", "programmatic", "-g", "sayword"], "game 'sayword' has 1 player slot"),
    (["-m", "tiny-random", "-m", "tiny-random+adapters/none", "-g", "relay"], "is not a folder"),
    (["-m", "tiny-random", "-m", "tiny-random+foreign", "-g", "relay"], "trained on base model"),
    (["-m", "tiny-randm", "-m", "programmatic", "-g", "relay"], "tiny-random"),
    (["-m", "tiny-random", "-m", "programmatic", "-g", "relay", "-n", "0"], "--num-instances"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(toy_workspace, foreign_adapter, args, message):
    foreign_adapter(toy_workspace / "foreign")
    before = sorted(p.name for p in toy_workspace.iterdir())
    result = invoke(*args, "-o", "cup")
    assert result.exit_code == 2, result.output
    assert message in result.output and len(result.output.strip().splitlines()) == 1
    assert sorted(p.name for p in toy_workspace.iterdir()) == before


def test_an_existing_output_folder_is_never_reused(toy_workspace):
    (toy_workspace / "cup").mkdir()
    (toy_workspace / "cup" / "mine.txt").write_text("keep")
    result = invoke("-m", "programmatic", "-m", "mock", "-g", "relay", "-o", "cup")
    assert result.exit_code == 2 and "exists already" in result.output
    assert [p.name for p in (toy_workspace / "cup").iterdir()] == ["mine.txt"]
