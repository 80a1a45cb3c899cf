"""The learning benchmark's plumbing on the real embedded model (slow: minutes)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_learning_benchmark_quick_on_smol(clem_workspace, tmp_path):
    out = tmp_path / "bench"
    done = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "learning.py"), "--quick",
                           "-l", "smol-135m", "--games", "referencegame", "--max-tokens", "24",
                           "--out", str(out)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=3000)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((out / "learning.json").read_text())
    stages = [s["stage"] for s in report["stages"]]
    assert stages[:2] == ["baseline", "sft+lora"] and stages[-1] == "sft+lora+grpo"
    # the checkpoint nearest half the GRPO budget, when one was saved before the last
    assert all(s.startswith("sft+lora+grpo (checkpoint-") for s in stages[2:-1]) and len(stages) <= 4
    for stage in report["stages"]:
        assert [g["game"] for g in stage["eval"]["games"]] == ["referencegame"]
    assert (out / "learning.png").exists()
