"""The trainers' end-of-run evaluation (playpen.training.common.final_evaluation): the trained
games, a game set and the static suite, for the base model (adapters off) and the adapter,
written to playpen-run.json and printed as `playpen eval --compare` prints them; the base
model's numbers cached per model and settings."""
import json

import pytest
from click.testing import CliRunner

from playpen.cli import cli

# 1 SFT step on programmatic demonstrations; 5 referencegame + 2 wordle episodes and 4
# questions per side; short replies
RUN = ["run", "sft", "-l", "tiny-random", "-L", "6", "--games", "referencegame", "--max-steps", "1",
       "--batch-size", "2", "--max-length", "400", "--lora-r", "2", "--demo-max-instances", "1",
       "--eval-max-instances", "1", "--eval-static-limit", "4"]
ROWS = ["clemscore trained_games", "clemscore out_of_domain", "clemscore (all games played)", "statscore",
        "  playpen_word_clues (acc)"]


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture
def sets_workspace(tiny_workspace):
    """A sets file in the working directory: wordle as the out-of-domain set (small and fast)."""
    (tiny_workspace / "game_sets.json").write_text(json.dumps(
        {"sets": {"in_domain": ["taboo"], "out_of_domain": ["wordle"]}, "static_tasks": ["playpen_word_clues"]}))
    return tiny_workspace


def summary_of(workspace):
    return json.loads((workspace / "models" / "sft+lora" / "tiny-random" / "playpen-run.json").read_text())


def test_the_end_of_run_evaluation_reports_before_and_after(sets_workspace):
    result = invoke(*RUN)
    assert result.exit_code == 0, result.output
    summary = summary_of(sets_workspace)
    before_after = summary["before_after"]
    assert [r["name"] for r in before_after["rows"]] == ROWS and before_after["before_cached"] is False
    results = sets_workspace / "results"
    before, after = sets_workspace / before_after["before"], sets_workspace / before_after["after"]
    assert before.parent == results and before.name.startswith("tiny-random+base-")
    assert after == results / "tiny-random+sft+lora-checkpoint-1"
    # the numbers written are the folders' own: each set's clemscore and the statscore
    rows = {r["name"]: r for r in before_after["rows"]}
    for side, folder in (("before", before), ("after", after)):
        clem = json.loads((folder / "playpen-eval.json").read_text())
        static = json.loads((folder / "playpen-static.json").read_text())
        assert clem["sets"]["trained_games"]["games"] == ["referencegame"]
        assert clem["sets"]["out_of_domain"]["num_episodes"] == 2  # wordle: 2 experiments, 1 instance each
        assert rows["clemscore trained_games"][side] == clem["sets"]["trained_games"]["clemscore"]
        assert rows["clemscore out_of_domain"][side] == clem["sets"]["out_of_domain"]["clemscore"]
        assert rows["statscore"][side] == static["statscore"] and static["tasks"][0]["num_samples"] == 4
        assert len(list((folder / "referencegame").rglob("scores.json"))) == 5
    assert summary["eval"]["run_name"] == after.name and summary["eval_sets"]["out_of_domain"]["games"] == ["wordle"]
    assert summary["static"]["statscore"] == rows["statscore"]["after"]
    # printed as `playpen eval --compare BEFORE AFTER` prints it
    compare = invoke("eval", "--compare", before_after["before"], before_after["after"])
    assert compare.exit_code == 0 and compare.output.strip() in result.output
    assert (after / "playpen-compare.json").exists()

    # a second run with the same model and settings reuses the base model's numbers
    settings = (before / "playpen-before.json").stat().st_mtime_ns
    result = invoke(*RUN, "--overwrite")
    assert result.exit_code == 0, result.output
    again = summary_of(sets_workspace)["before_after"]
    assert again["before_cached"] is True and again["before"] == before_after["before"]
    assert "before (the base model) -> after (before: cached by an earlier run)" in result.output
    assert (before / "playpen-before.json").stat().st_mtime_ns == settings
    assert [r["before"] for r in again["rows"]] == [r["before"] for r in before_after["rows"]]


def test_the_parts_of_the_end_of_run_evaluation_are_options(sets_workspace):
    result = invoke(*RUN, "--no-eval-before", "--eval-sets", "none", "--no-eval-static")
    assert result.exit_code == 0, result.output
    summary = summary_of(sets_workspace)
    assert "before_after" not in summary and "static" not in summary
    assert list(summary["eval_sets"]) == ["trained_games"]
    assert sorted(p.name for p in (sets_workspace / "results").iterdir()) == ["tiny-random+sft+lora-checkpoint-1"]
    assert "clemscore per game set" in result.output and "before (the base model) -> after" not in result.output


@pytest.mark.parametrize("args, message", [
    (["--eval-sets", "nope"], "unknown game set 'nope' in "),
    (["--eval-sets", ""], "option --eval-sets: '' is not valid; expected set names of the sets file"),
    (["--eval-static-limit", "-1"], "option --eval-static-limit: -1 is not valid"),
])
def test_a_bad_evaluation_option_stops_before_training(sets_workspace, args, message):
    result = invoke(*RUN, *args)
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output
    assert not (sets_workspace / "models" / "sft+lora" / "tiny-random").exists()


def test_adapters_off_gives_the_base_models_outputs(tiny_model_dir):
    """Switched off in place (as TRL's peft_config injects the layers into the learner's model)
    and on a PeftModel; the layers are on again after."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from playpen.training.common.final_evaluation import adapters_off, has_adapters
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        base = model(ids).logits
        assert not has_adapters(model)
        peft = get_peft_model(model, LoraConfig(r=2, target_modules="all-linear", init_lora_weights=False))
        assert has_adapters(model)
        adapted = model(ids).logits
        assert not torch.allclose(base, adapted)
        for target in (model, peft):
            with adapters_off(target):
                assert torch.allclose(model(ids).logits, base)
            assert torch.allclose(model(ids).logits, adapted)


# ----------------------------------------------------------------------------- the other paths

def assert_before_after(workspace, summary, after_name):
    """The comparison in `summary` is the one of the base model's folder and `after_name`'s,
    with the numbers those folders hold."""
    before_after = summary["before_after"]
    assert [r["name"] for r in before_after["rows"]] == ROWS
    before, after = workspace / before_after["before"], workspace / before_after["after"]
    assert before.name.startswith("tiny-random+base-") and after == workspace / "results" / after_name
    rows = {r["name"]: r for r in before_after["rows"]}
    for side, folder in (("before", before), ("after", after)):
        clem = json.loads((folder / "playpen-eval.json").read_text())
        static = json.loads((folder / "playpen-static.json").read_text())
        assert rows["clemscore trained_games"][side] == clem["sets"]["trained_games"]["clemscore"]
        assert rows["clemscore out_of_domain"][side] == clem["sets"]["out_of_domain"]["clemscore"]
        assert rows["statscore"][side] == static["statscore"]
    assert summary["static"]["statscore"] == rows["statscore"]["after"]
    return before_after


def test_a_full_fine_tune_is_compared_with_its_base_model_loaded_again(sets_workspace):
    """sft-full has no adapter to switch off: the base model is loaded again by name for before."""
    lora = RUN.index("--lora-r")
    full = ["run", "sft-full", *RUN[2:lora], *RUN[lora + 2:]]
    result = invoke(*full)
    assert result.exit_code == 0, result.output
    assert "has no adapter to switch off; loading it again by name" in result.output
    summary = json.loads((sets_workspace / "models" / "sft" / "tiny-random" / "playpen-run.json").read_text())
    before_after = assert_before_after(sets_workspace, summary, "tiny-random+sft-checkpoint-1")
    assert before_after["before_cached"] is False and "before (the base model) -> after" in result.output


PIPELINE = ["run", "pipeline", "-l", "tiny-random", "-L", "6", "--games", "referencegame", "--stages", "sft",
            "--stage-steps", "1", "--stage-options", "sft: --batch-size 2 --max-length 400 --lora-r 2 "
            "--demo-max-instances 1", "--eval-max-instances", "1", "--eval-static-limit", "4"]


def test_a_pipeline_reports_before_and_after_also_when_resumed_with_every_stage_done(sets_workspace, monkeypatch):
    from playpen.training.common.final_evaluation import FinalEvaluation, has_adapters
    evaluated = []
    run = FinalEvaluation.run

    def recorded(self, players, learner):
        evaluated.append(has_adapters(learner.model))
        return run(self, players, learner)
    monkeypatch.setattr(FinalEvaluation, "run", recorded)
    result = invoke(*PIPELINE)
    assert result.exit_code == 0, result.output
    path = sets_workspace / "models" / "pipeline" / "tiny-random" / "sft" / "playpen-run.json"
    first = assert_before_after(sets_workspace, json.loads(path.read_text()), "tiny-random+pipeline-sft")
    assert first["before_cached"] is False
    # every stage done: the last adapter is put onto a fresh learner and evaluated again
    result = invoke(*PIPELINE, "--resume")
    assert result.exit_code == 0, result.output
    assert "sft done; resuming at the evaluation" in result.output
    again = assert_before_after(sets_workspace, json.loads(path.read_text()), "tiny-random+pipeline-sft")
    assert again["before_cached"] is True
    assert [r["after"] for r in again["rows"]] == [r["after"] for r in first["rows"]]
    assert evaluated == [True, True]  # the adapter was on the evaluated learner both times


# ----------------------------------------------------------------------------- the default sample

def test_by_default_the_trained_games_are_a_sample_and_the_table_says_how_large(sets_workspace):
    """4 held-out instances per experiment (referencegame: 20 of 90 episodes) unless
    --eval-max-instances 0 asks for all; the table names the episodes and questions."""
    default = [a for i, a in enumerate(RUN) if "--eval-max-instances" not in RUN[max(0, i - 1):i + 1]]
    result = invoke(*default, "--eval-sets", "none")
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in summary_of(sets_workspace)["before_after"]["rows"]}
    assert rows["clemscore trained_games"]["over"] == {"before": 20, "after": 20, "unit": "episodes"}
    assert rows["statscore"]["over"] == {"before": 4, "after": 4, "unit": "questions"}
    lines = {line.split("  ")[0]: line for line in result.output.splitlines()}
    assert lines["clemscore trained_games"].endswith("  20 episodes")
    assert lines["statscore"].endswith("  4 questions")
    assert summary_of(sets_workspace)["config"]["eval_max_instances"] == 4
    before = summary_of(sets_workspace)["before_after"]["before"]

    result = invoke(*default, "--eval-sets", "none", "--eval-max-instances", "0", "--no-eval-before", "--overwrite")
    assert result.exit_code == 0, result.output
    after = sets_workspace / "results" / "tiny-random+sft+lora-checkpoint-1"
    assert len(list((after / "referencegame").rglob("scores.json"))) == 90
    compare = invoke("eval", "--compare", before, after)
    assert compare.exit_code == 0, compare.output
    line = next(x for x in compare.output.splitlines() if x.startswith("clemscore trained_games"))
    assert line.endswith("  20 / 90 episodes")
