"""benchmarks/precision.py: SFT steps in fp32 and bf16 autocast from the same rows and weights."""

import pytest


@pytest.fixture(scope="module")
def precision(benchmark_script):
    return benchmark_script("precision")


def test_both_precisions_train_the_same_rows_and_differ_by_rounding(precision, tiny_workspace, monkeypatch):
    monkeypatch.chdir(tiny_workspace)  # run_variant works in a folder of its own; back here after
    temp = tiny_workspace / "temp"
    temp.mkdir()
    monkeypatch.setattr(precision.tempfile, "tempdir", str(temp))
    args = precision.main.__globals__["argparse"].Namespace(learner="tiny-random", max_steps=2, batch_size=2,
                                                             grpo_steps=1, quick=True)
    fp32 = precision.run_variant("sft-fp32", args)
    bf16 = precision.run_variant("sft-bf16", args)
    assert fp32["steps"] == bf16["steps"] == 2 and fp32["precision"] == "fp32" and bf16["precision"] == "bf16"
    assert "--precision bf16" in bf16["command"]
    assert fp32["step_s"] > 0 and bf16["step_s"] > 0 and fp32["peak_rss_mb"] > 100
    # step 1: the same rows and weights, so the losses differ by bf16's rounding alone
    assert bf16["loss"][0] == pytest.approx(fp32["loss"][0], rel=0.02) and bf16["loss"][0] != fp32["loss"][0]
    assert list(temp.iterdir()) == []  # each variant's run folder (its checkpoints) is removed once read


def test_an_unknown_variant_is_one_line_and_exit_2(precision, capsys):
    assert precision.main(["--only", "sft-fp16"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["precision.py: --only: unknown variant 'sft-fp16' (valid: sft-fp32, sft-bf16, grpo-fp32, grpo-bf16)"]
