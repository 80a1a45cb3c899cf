"""Named splits as the trainers' instance selector (--split NAME --splits FILE): the splits
file's format (lists are splits, other keys are not), SFT and GRPO really train only on the
split's items, the run records what it trained on, and every refusal is one line, exit 2,
before any model loads and with no folder left behind (the leakage guard included)."""
import json

import pytest
from click.testing import CliRunner

from playpen.cli import cli
from playpen.errors import EvaluationError
from playpen.evaluation.splits import load_splits, split_items, split_names
from playpen.training.sft.demonstrations import supervised_records
from playpen.training.sft.trainer import SFTLoraConfig

# sayword (tests/toygames): in/instances.json holds words/0..3 (held out), in/instances_train.json
# train_words/0..1
ENTRY = {"instances": "instances", "content": "word", "clusters": {"words/0": "a"}, "notes": "by hand",
         "dev": ["words/0"], "test": ["words/2", "words/3"], "half": ["train_words/1"],
         "leaky": ["words/0", "words/1", "words/2"], "clean": ["words/1"], "ghost": ["train_words/7"],
         "empty": []}
QUICK = dict(games="sayword", batch_size=2, max_length=400, lora_r=4, evaluate=False)


@pytest.fixture
def splits_file(toy_workspace):
    path = toy_workspace / "splits.json"
    path.write_text(json.dumps({"games": {"sayword": ENTRY}}))
    return path


def played_items(folder):
    """``<experiment>/<game_id>`` of every episode played under `folder` (clemcore layout)."""
    items = set()
    for instance in folder.rglob("instance.json"):
        game_id = json.loads(instance.read_text())["game_id"]
        items.add(f"{instance.parent.parent.name}/{game_id}")
    return items


# ----------------------------------------------------------------------------- the format

def test_lists_are_splits_and_other_keys_are_not(tmp_path):
    path = tmp_path / "splits.json"
    path.write_text(json.dumps({"games": {"sayword": ENTRY}}))
    assert split_names(load_splits(path)["sayword"]) == ["dev", "test", "half", "leaky", "clean", "ghost", "empty"]
    path.write_text(json.dumps({"games": {"sayword": {"instances": "instances", "tags": ["x", "y"]}}}))
    with pytest.raises(EvaluationError, match="'tags' is not one"):  # a list is a split: of item ids
        load_splits(path)
    path.write_text(json.dumps({"games": {"sayword": {"instances": "instances", "clusters": {}}}}))
    with pytest.raises(EvaluationError, match="expected splits"):  # no list at all
        load_splits(path)


def test_eval_plays_held_out_splits_only_and_names_the_files_splits(splits_file):
    assert split_items(splits_file, "test", ["sayword"]) == ({"sayword": ["words/2", "words/3"]}, "instances")
    with pytest.raises(EvaluationError, match=r"'half' is not valid; expected dev or test .*defines dev, test, "
                                              r"half, leaky"):
        split_items(splits_file, "half", ["sayword"])
    with pytest.raises(EvaluationError, match=r"has no 'nope' split \(the file defines dev, test, half"):
        SFTLoraConfig(**QUICK, split="nope", splits=str(splits_file))


# ----------------------------------------------------------------------------- what is trained on

def test_sft_learns_only_the_splits_demonstrations(toy_workspace, splits_file):
    config = SFTLoraConfig(**QUICK, split="half", splits=str(splits_file))
    assert config.train_items == {"sayword": ["train_words/1"]}
    records = supervised_records(config, toy_workspace / "out")
    assert records and {(r["meta"]["experiment"], r["meta"]["game_id"]) for r in records} == {("train_words", 1)}
    everything = supervised_records(SFTLoraConfig(**QUICK), toy_workspace / "out")
    # the whole file still plays without --split, into its own folder (the split's is not reused)
    assert {r["meta"]["game_id"] for r in everything} == {0, 1}
    assert len(list((toy_workspace / "out" / "demonstrations").iterdir())) == 2


def test_an_sft_run_on_a_split_says_what_it_trained_on(toy_workspace, splits_file):
    result = CliRunner().invoke(cli, ["run", "sft", "-l", "tiny-random", "--games", "sayword", "--split", "half",
                                      "--splits", str(splits_file), "--max-steps", "1", "--batch-size", "1",
                                      "--lora-r", "4", "--no-evaluate"])
    assert result.exit_code == 0, result.output
    assert f"training on split 'half' of {splits_file}: 1 of sayword" in result.output
    assert played_items(toy_workspace / "playpen-records" / "demonstrations") == {"train_words/1"}
    summary = json.loads((toy_workspace / "models" / "sft+lora" / "tiny-random" / "playpen-run.json").read_text())
    assert (summary["config"]["split"], summary["config"]["splits"]) == ("half", str(splits_file))


def test_grpo_rolls_out_only_the_splits_instances(toy_workspace, splits_file):
    from playpen.cli.run import trainer_class
    from playpen.models import load_model_by_name
    cls = trainer_class("grpo")
    learner = load_model_by_name("tiny-random", gen_args=dict(temperature=1.0, max_tokens=3), role="learner")
    config = cls.config_class(games="sayword", split="half", splits=str(splits_file), max_steps=2, num_generations=2,
                              groups_per_step=2, lora_r=4, save_steps=100, evaluate=False)
    cls(learner, config=config, progress=False).learn(None)
    records = toy_workspace / "playpen-records" / "grpo+lora" / "tiny-random" / "selfplay"
    assert len(list(records.rglob("interactions.json"))) >= 2 * 2  # two steps of two-episode groups
    assert played_items(records) == {"train_words/1"}


# ----------------------------------------------------------------------------- refusals

@pytest.mark.parametrize("options, expected", [
    (["--split", "half"], "--split and --splits go together"),
    (["--splits", "SPLITS"], "--split and --splits go together"),
    (["--split", "half", "--splits", "missing.json"], "missing.json: no such file"),
    (["--games", "relay", "--split", "half", "--splits", "SPLITS"], "no split for relay (the file splits sayword)"),
    (["--split", "nope", "--splits", "SPLITS"], "sayword has no 'nope' split (the file defines dev, test, half, "
                                                  "leaky, clean, ghost, empty)"),
    (["--split", "ghost", "--splits", "SPLITS"], "1 of sayword's 'ghost' items are not in in/instances_train.json "
                                                   "(first: train_words/7)"),
    (["--split", "empty", "--splits", "SPLITS"], "sayword's 'empty' split lists no items"),
    (["--split", "dev", "--splits", "SPLITS"], "are ids of in/instances.json, the run trains on "
                                                 "in/instances_train.json (pass --train-instances instances)"),
    # the leakage guard: training on the held-out file may not touch its dev or test items
    (["--split", "leaky", "--splits", "SPLITS", "--train-instances", "instances"],
     "2 of sayword's 'leaky' items are dev or test items of in/instances.json, the held-out file"),
    (["--split", "dev", "--splits", "SPLITS", "--train-instances", "instances"], "1 of sayword's 'dev' items are "
                                                                                  "dev or test items"),
    (["--split", "half", "--splits", "SPLITS", "--dataset", "data.jsonl"], "does not filter --dataset or --records"),
])
def test_a_bad_split_is_one_line_before_anything_loads(toy_workspace, splits_file, options, expected):
    args = ["--games", "sayword", *[str(splits_file) if o == "SPLITS" else o for o in options]]
    result = CliRunner().invoke(cli, ["run", "sft", "-l", "tiny-random", *args])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("playpen: error: ") and result.output.count("\n") == 1, result.output
    assert expected in result.output
    assert not (toy_workspace / "models").exists() and not (toy_workspace / "playpen-records").exists()


def test_a_split_of_the_held_out_file_without_dev_or_test_items_trains(toy_workspace, splits_file):
    config = SFTLoraConfig(**QUICK, split="clean", splits=str(splits_file), train_instances="instances")
    assert config.train_items == {"sayword": ["words/1"]}


def test_the_entrys_training_file_must_be_the_runs(toy_workspace, tmp_path):
    path = tmp_path / "splits.json"
    path.write_text(json.dumps({"games": {"sayword": {**ENTRY, "train_instances": "instances_other"}}}))
    with pytest.raises(EvaluationError, match=r"'half' items of sayword are ids of in/instances_other.json, the run "
                                              r"trains on in/instances_train.json \(pass --train-instances"):
        SFTLoraConfig(**QUICK, split="half", splits=str(path))
