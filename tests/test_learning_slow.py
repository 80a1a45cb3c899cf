"""The learning comparison's plumbing on the real embedded model (slow: minutes), and its
target checks on hand-made results (fast)."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def report_module():
    spec = importlib.util.spec_from_file_location("learning_report", REPO_ROOT / "benchmarks" / "learning_report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def result(trains, **settings):
    return {"trains": trains, "settings": {k.replace("__", "/"): {"percent_played": p, "quality": q}
                                           for k, (p, q) in settings.items()}}


def test_targets_on_hand_made_results():
    report = report_module()
    settings = ["referencegame/follower", "taboo/guesser", "adversarial_taboo/attacker"]
    results = {
        "sft": result(["referencegame", "taboo", "adversarial_taboo"], referencegame__follower=(100, 30.0),
                      taboo__guesser=(80, 10.0), adversarial_taboo__attacker=(90, 20.0)),
        # +10 on two games, adversarial_taboo (not trained) loses exactly 10 points of % played
        "good": result(["referencegame", "taboo"], referencegame__follower=(100, 40.0), taboo__guesser=(80, 25.0),
                       adversarial_taboo__attacker=(80, 20.0)),
        # +9.9 and +50 on one game only; adversarial_taboo loses 10.1 points
        "bad": result(["referencegame"], referencegame__follower=(100, 39.9), taboo__guesser=(69.9, 60.0),
                      adversarial_taboo__attacker=(79.9, 5.0)),
    }
    lines_a, lines_b = report.targets(results, settings)
    assert lines_a[0].startswith("- good: MET") and "2 game(s): referencegame, taboo" in lines_a[0]
    assert lines_a[1].startswith("- bad: not met") and "1 game(s): taboo" in lines_a[1]
    assert lines_b[0].startswith("- good: MET") and "+10.0 in adversarial_taboo/attacker" in lines_b[0]
    # bad trained only referencegame: taboo's drop (10.1) is the largest untrained one
    assert lines_b[1].startswith("- bad: not met") and "+10.1 in" in lines_b[1]
    table = report.table_markdown(results, settings)
    assert "| good | 0 | 0 | 100 / 40.0 | 80 / 25.0 | 80 / 20.0 |" in table


def test_attacker_win_rate_counts_aborted_episodes_as_not_won(tmp_path):
    report = report_module()
    episodes = [{"Attacker Win": 1}, {"Attacker Win": 0}, {"Attacker Win": float("nan"), "Aborted": 1},
                {"Attacker Win": 1}]
    for i, scores in enumerate(episodes):
        folder = tmp_path / "adversarial_taboo" / "low_en" / f"instance_{i:05d}"
        folder.mkdir(parents=True)
        (folder / "scores.json").write_text(json.dumps({"episode scores": scores}))
    assert report.attacker_win_rate(tmp_path) == 50.0
    assert report.attacker_win_rate(tmp_path / "adversarial_taboo" / "none") is None


def test_episode_scores_and_the_paired_interval_of_a_gain(tmp_path):
    report = report_module()
    for i, scores in enumerate([{"Main Score": 100}, {"Main Score": 0}, {"Main Score": float("nan"), "Aborted": 1}]):
        folder = tmp_path / "referencegame" / "letter_grids" / f"instance_{i:05d}"
        folder.mkdir(parents=True)
        (folder / "scores.json").write_text(json.dumps({"episode scores": scores}))
    assert report.episode_scores(tmp_path) == {"letter_grids/instance_00000": 100.0,
                                               "letter_grids/instance_00001": 0.0,
                                               "letter_grids/instance_00002": None}
    keys = [f"e/instance_{i:05d}" for i in range(30)]
    base = {k: (100.0 if i % 3 == 0 else 0.0) for i, k in enumerate(keys)}  # 33.3: a constant answer
    same = report.gain_interval(base, dict(base))
    assert same == (0.0, 0.0)  # the same episodes: no gain in any resample
    # 6 instances now right, 2 now wrong (46.7, +13.3): on 30 instances the interval holds 0 too
    better = dict(base, **{keys[i]: 100.0 for i in (1, 2, 4, 5, 7, 8)}, **{keys[i]: 0.0 for i in (0, 3)})
    low, high = report.gain_interval(better, base)
    assert low < 0 < 13.3 < high
    # the same net gain from 4 instances right and none wrong: every resample gains, 0 is outside
    one_way = dict(base, **{keys[i]: 100.0 for i in (1, 2, 4, 5)})
    low, high = report.gain_interval(one_way, base)
    assert 0 < low < 13.3 < high
    # every instance right (+66.7): far from 0
    low, high = report.gain_interval({k: 100.0 for k in keys}, base)
    assert 40 < low < 66.7 < high
    assert report.gain_interval(better, base, seed=0) == report.gain_interval(better, base, seed=0)  # seeded
    assert report.gain_interval({keys[0]: 1.0}, {keys[0]: 0.0}) is None  # fewer than two common instances
    # the table of gains: the interval where scores are known, the gain alone where not
    results = {"sft": result(["referencegame"], referencegame__follower=(100, 33.3)),
               "m": result(["referencegame"], referencegame__follower=(100, 46.7))}
    assert "| m | +13.4 |" in report.gains_markdown(results, ["referencegame/follower"])
    results["sft"]["settings"]["referencegame/follower"]["scores"] = base
    results["m"]["settings"]["referencegame/follower"]["scores"] = better
    assert "| m | +13.4 [" in report.gains_markdown(results, ["referencegame/follower"])


def test_target_a_uses_the_attacker_win_rate_for_adversarial_taboo():
    report = report_module()
    settings = ["taboo/guesser", "adversarial_taboo/attacker"]
    sft = result(["taboo", "adversarial_taboo"], taboo__guesser=(100, 10.0), adversarial_taboo__attacker=(0, None))
    sft["settings"]["adversarial_taboo/attacker"]["win_rate"] = 0.0
    # quality n/a for SFT (nothing played), but the win rate compares: 0 -> 12.5 is +12.5
    better = result(["taboo", "adversarial_taboo"], taboo__guesser=(100, 25.0),
                    adversarial_taboo__attacker=(50, 25.0))
    better["settings"]["adversarial_taboo/attacker"]["win_rate"] = 12.5
    lines_a, _ = report.targets({"sft": sft, "better": better}, settings)
    assert lines_a[0].startswith("- better: MET") and "adversarial_taboo/attacker +12.5" in lines_a[0]
    assert "| better | 0 | 0 | 100 / 25.0 | 50 / 25.0 (wins 12 %) |" in report.table_markdown(
        {"better": better}, settings)


def learning_module():
    sys.path.insert(0, str(REPO_ROOT / "benchmarks"))  # learning.py imports learning_report beside it
    try:
        spec = importlib.util.spec_from_file_location("learning_bench", REPO_ROOT / "benchmarks" / "learning.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up while they are made
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(REPO_ROOT / "benchmarks"))
    return module


def test_a_methods_own_temperature_is_used_and_fingerprinted_only_off_the_default():
    import argparse
    import dataclasses
    learning = learning_module()
    args = argparse.Namespace(learner="smol-135m", minutes=15.0, eval_instances=6, max_tokens=40, seed=42,
                              quick=False, temperature=learning.DEFAULT_TEMPERATURE)
    method = learning.Method("sft", {"max_steps": 3})
    base = learning.fingerprint("m", method, args)
    # results cached at the default temperature keep their fingerprints
    assert learning.fingerprint("m", dataclasses.replace(method, temperature=learning.DEFAULT_TEMPERATURE), args) == base
    hot = dataclasses.replace(method, temperature=1.0)
    assert learning.fingerprint("m", hot, args) != base
    assert learning.fingerprint("m", method, argparse.Namespace(**{**vars(args), "temperature": 1.0})) == \
        learning.fingerprint("m", hot, args)
    assert learning.METHODS["grpo-selfplay-hot"].temperature == 1.0
    assert learning.METHODS["grpo-selfplay"].temperature is None
    # the temperature the learner trains at: the method's own, else --temperature
    assert learning.training_temperature(hot, args) == 1.0
    assert learning.training_temperature(method, args) == learning.DEFAULT_TEMPERATURE


def test_every_method_passes_its_trainers_checks(clem_workspace, monkeypatch):
    """Every method's options are known to its trainer and pass the trainer's own checks
    (the benchmark runs these before anything trains), so a typo fails here, not after hours."""
    import argparse
    monkeypatch.chdir(clem_workspace)
    learning = learning_module()
    args = argparse.Namespace(learner="smol-135m", quick=False)
    for name, method in learning.METHODS.items():
        cls, config, options = learning.configure(name, method, args, clem_workspace / "work")
        for key, value in method.options.items():
            assert getattr(config, key) == value, (name, key)
        assert cls.config_class is type(config)
    with pytest.raises(SystemExit, match="has no option"):
        learning.configure("x", learning.Method("sft", {"no_such_option": 1}), args,
                           clem_workspace / "work")


@pytest.mark.slow
def test_learning_comparison_quick_on_smol(clem_workspace, tmp_path):
    out = tmp_path / "bench"
    command = [sys.executable, str(REPO_ROOT / "benchmarks" / "learning.py"), "--quick", "-l", "smol-135m",
               "--methods", "baseline,sft,dpo-branch", "--max-tokens", "24", "--out", str(out)]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=3000)
    assert done.returncode == 0, done.stderr[-3000:]
    for name in ("baseline", "sft", "dpo-branch"):
        data = json.loads((out / f"learning-{name}.json").read_text())
        assert set(data["settings"]) == {"referencegame/follower", "referencegame/self-play", "taboo/guesser",
                                         "taboo/self-play", "adversarial_taboo/attacker"}
        assert data["fingerprint"]
    assert json.loads((out / "learning-dpo-branch.json").read_text())["steps"] >= 1
    assert "referencegame/follower" in json.loads((out / "learning-sft.json").read_text())["answers"]
    assert (out / "learning-comparison.png").exists()
    assert "| dpo-branch |" in (out / "learning-comparison.md").read_text()
    # cached: a second call trains and plays nothing
    again = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "== dpo-branch: cached" in again.stdout, again.stderr[-2000:]


def test_set_overrides_every_trainer_that_has_the_option_and_changes_the_fingerprint(clem_workspace, monkeypatch):
    """``--set micro_batch_size=16`` (a GPU run's setting) reaches every GRPO method, not the
    shared SFT warm-up, and makes those results cache apart from the CPU runs' ones."""
    import argparse
    monkeypatch.chdir(clem_workspace)
    learning = learning_module()
    assert learning.parse_settings(["micro_batch_size=16", "baseline=running", "augment=true"]) == \
        {"micro_batch_size": 16, "baseline": "running", "augment": True}
    with pytest.raises(ValueError, match="KEY=VALUE"):
        learning.parse_settings(["micro_batch_size"])
    plain = argparse.Namespace(learner="smol-135m", minutes=15.0, eval_instances=6, max_tokens=40, seed=42,
                               quick=False, temperature=learning.DEFAULT_TEMPERATURE, set={})
    gpu = argparse.Namespace(**{**vars(plain), "set": {"micro_batch_size": 16}})
    work = clem_workspace / "work"
    _, config, _ = learning.configure("grpo-selfplay-sft", learning.METHODS["grpo-selfplay-sft"], gpu, work)
    assert config.micro_batch_size == 16 and config.sft_coef == 1.0
    _, config, _ = learning.configure("grpo-selfplay-sft", learning.METHODS["grpo-selfplay-sft"], plain, work)
    assert config.micro_batch_size == 0  # automatic: 1 on a CPU, up to 16 on a GPU
    # an option that a trainer lacks is left out for it (SPIN has no micro-batches), the warm-up never changes
    _, config, options = learning.configure("spin", learning.METHODS["spin"], gpu, work)
    assert "micro_batch_size" not in options
    for name in ("grpo-partner", "spin"):
        assert learning.fingerprint(name, learning.METHODS[name], gpu) != \
            learning.fingerprint(name, learning.METHODS[name], plain)
    assert learning.fingerprint("sft", learning.METHODS["sft"], gpu) == \
        learning.fingerprint("sft", learning.METHODS["sft"], plain)
    # a key that no method's trainer has: one line, before anything trains
    done = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "learning.py"), "--methods", "spin",
                           "--set", "no_such_option=1", "--out", str(clem_workspace / "out")],
                          cwd=clem_workspace, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "no_such_option" in done.stderr and "Traceback" not in done.stderr
    done = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "learning.py"), "--set", "oops",
                           "--out", str(clem_workspace / "out")], cwd=clem_workspace, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 2 and "KEY=VALUE" in done.stderr


def test_the_warm_up_serves_every_minutes_budget():
    """--minutes bounds the methods after the warm-up, not the warm-up's 8 steps: a longer
    run reuses the cached warm-up; the methods' own caches still tell budgets apart."""
    import argparse
    learning = learning_module()
    args = argparse.Namespace(learner="smol-135m", minutes=15.0, eval_instances=6, max_tokens=40, seed=42,
                              quick=False, temperature=learning.DEFAULT_TEMPERATURE, set={})
    longer = argparse.Namespace(**{**vars(args), "minutes": 45.0})
    assert learning.fingerprint("sft", learning.METHODS["sft"], longer) == \
        learning.fingerprint("sft", learning.METHODS["sft"], args)
    assert learning.fingerprint("spin", learning.METHODS["spin"], longer) != \
        learning.fingerprint("spin", learning.METHODS["spin"], args)
