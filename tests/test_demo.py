"""`make demo`'s job (python -m playpen.demo) end to end on the tiny random model: the taboo
guesser played before and after SFT on the same held-out episodes, the table and the files."""
import json

from playpen import demo


def test_demo_trains_the_guesser_and_compares_the_same_episodes(tiny_workspace, capsys):
    root = tiny_workspace / "demo"
    assert demo.main(["-l", "tiny-random", "-n", "1", "--steps", "2", "--batch-size", "1",
                      "--demo-instances", "1", "-o", str(root)]) == 0
    out = capsys.readouterr().out
    summary = json.loads((root / "models" / "sft+lora" / "tiny-random" / "playpen-run.json").read_text())
    assert summary["config"]["roles"] == "Guesser" and summary["config"]["games"] == "taboo"
    assert summary["checkpoint"].endswith("checkpoint-2") and "eval" not in summary
    before = json.loads((root / "results" / "tiny-random" / "playpen-eval.json").read_text())
    after = json.loads((root / "results" / "tiny-random+sft-checkpoint-2" / "playpen-eval.json").read_text())
    # 3 experiments x 1 held-out instance, the guesser the learner's (player 2 of taboo)
    for table in (before, after):
        assert [g["game"] for g in table["games"]] == ["taboo"] and table["games"][0]["num_episodes"] == 3
    assert "3 held-out episodes:" in out and "exact sign-flip p =" in out
    assert "tiny-random + adapter (checkpoint-2)" in out
    # the cost: CPU seconds per logged step (not inflated by other jobs) and per phase
    steps = [json.loads(line) for line in
             (root / "models" / "sft+lora" / "tiny-random" / "playpen-log.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2] and all(s["time/cpu_s"] > 0 for s in steps)
    assert "CPU (user + system):" in out and "peak RSS" in out


def test_demo_refuses_an_existing_folder_and_bad_sizes(tiny_workspace, capsys):
    (tiny_workspace / "taken").mkdir()
    try:
        demo.main(["-o", str(tiny_workspace / "taken")])
    except SystemExit as stop:
        assert "already exists" in str(stop.code)
    else:
        raise AssertionError("an existing output folder was accepted")
    try:
        demo.main(["--steps", "0"])
    except SystemExit as stop:
        assert stop.code == 2
    assert "--steps" in capsys.readouterr().err
