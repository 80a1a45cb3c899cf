"""benchmarks/scale.py's CPU smoke test: the tiny shape through every part, so the GPU
benchmark cannot rot between GPU runs (its numbers come from a GPU; here only its shape)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


ENGINES = ("dynamic", "static", "static-compile")


def run_quick(tmp_path, tokenizer_dir, engines, parts="decode,rollout,train"):
    temp = tmp_path / "temp"  # the benchmark's temporary folders, removed when it ends
    temp.mkdir()
    done = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "scale.py"), "--quick", "--out",
                           str(tmp_path), "--tokenizer", str(tokenizer_dir), "--engines", ",".join(engines),
                           "--parts", parts], capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          env={**os.environ, "TMPDIR": str(temp)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert not any(temp.glob("playpen-scale-*")), "the benchmark left its game folder behind"
    (path,) = tmp_path.glob("scale-*.json")
    (shape,) = json.loads(path.read_text())["shapes"]
    return done, shape


def test_scale_benchmark_runs_every_part_on_a_cpu(tmp_path, smol_tokenizer_dir):
    """Every part with the eager engines (the compiled one costs a minute of inductor
    compiling here: the slow test below)."""
    done, shape = run_quick(tmp_path, smol_tokenizer_dir, ENGINES[:2])
    assert shape["shape"] == "tiny"
    decode = shape["decode"]
    assert decode["static"]["tokens"] == decode["dynamic"]["tokens"]  # greedy: the same tokens
    assert all(len(row) == 6 for row in decode["static"]["tokens"])
    for engine in ENGINES[:2]:
        assert decode[engine]["decode_tok_s"] > 0 and decode[engine]["prefill_tok_s"] > 0
        rollout = shape["rollout"][engine]
        assert rollout["episodes"] == 4 and rollout["generated_tokens"] == 4 * 2 * 5  # 4 episodes x 2 turns x 5
    train = shape["train"]
    assert train["rows"] == 4 and train["learner_tokens"] == 40 and train["tokens"] > train["learner_tokens"]
    assert train["forward_s"] > 0 and train["backward_s"] > 0 and train["tok_s"] > 0
    assert shape["step"]["ratio"] >= 1.0
    assert "| tiny | static |" in done.stdout and "static-compile" not in decode


@pytest.mark.slow
def test_scale_benchmark_with_the_compiled_engine(tmp_path, smol_tokenizer_dir):
    """The compiled engine beside the eager ones: the same greedy tokens, compiled without
    falling back to eager steps, a bounded number of compiles."""
    done, shape = run_quick(tmp_path, smol_tokenizer_dir, ENGINES)
    decode = shape["decode"]
    assert decode["static"]["tokens"] == decode["dynamic"]["tokens"] == decode["static-compile"]["tokens"]
    assert decode["static-compile"]["compiles"] >= 1 and decode["static-compile"]["compile_error"] is None
    assert shape["static_compiles"] <= 4 and shape["static_compile_error"] is None
    assert decode["static-compile"]["decode_tok_s"] > 0
    assert shape["rollout"]["static-compile"]["generated_tokens"] == 4 * 2 * 5
    assert "| tiny | static-compile |" in done.stdout


def test_transformers_continuous_batching_beside_playpens_engine(tmp_path, smol_tokenizer_dir):
    """transformers' continuous batching, on the peft model and on a merged copy, is a reference
    for playpen's static engine: greedy on the same prompts (the tiny shape's adapter is random,
    so a path that skipped it would differ), the same tokens, every row its whole budget; the
    rollout part, through playpen's door, runs playpen's engines only."""
    done, shape = run_quick(tmp_path, smol_tokenizer_dir, ("static", "hf-continuous", "hf-continuous-merged"),
                            parts="decode,rollout")
    decode = shape["decode"]
    assert len(decode["static"]["tokens"]) == 4 and all(len(row) == 6 for row in decode["static"]["tokens"])
    for engine in ("hf-continuous", "hf-continuous-merged"):
        row = decode[engine]
        assert row["tokens"] == decode["static"]["tokens"], engine
        assert row["generated_tokens"] == 4 * 6 and row["decode_tok_s"] > 0 and row["prefill_tok_s"] > 0
        assert row["attention"] == "sdpa" and row["cuda_graphs"] == [False, False]  # the CPU: no flash, no graphs
        assert f"| tiny | {engine} |" in done.stdout
    assert decode["static_over_continuous"] > 0 and decode["static_over_continuous_merged"] > 0
    assert list(shape["rollout"]) == ["static"]


def test_unknown_shape_and_engine_are_refused(tmp_path):
    for flags, message in ((["--shapes", "qwen9"], "unknown shape(s) qwen9; valid: qwen3-0.6b"),
                           (["--engines", "fast"], "--engines takes dynamic, static, static-compile"),
                           (["--parts", "rollout"], "--parts takes decode, rollout, train")):
        done = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "scale.py"), *flags, "--out",
                               str(tmp_path)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and message in done.stderr
        assert not list(tmp_path.glob("scale-*.json"))
