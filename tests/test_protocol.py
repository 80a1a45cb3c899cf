"""The learning protocol (benchmarks/protocol.py, issue 28): its fixed splits never share an
item between dev and test or with training; a split is played item by item; the report's
statistics come from the per-item results alone; the runner's plumbing with a tiny model."""
import importlib
import json
import math
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO_ROOT / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    """benchmarks/protocol*.py as modules (they import each other from their folder)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield {name: importlib.import_module(name) for name in ("protocol_splits", "protocol_report", "protocol")}
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_the_splits_are_current_and_share_no_item(bench):
    splits_module = bench["protocol_splits"]
    splits = splits_module.load_splits()
    assert splits == splits_module.build_splits()  # the file is what the instance files and the seed give
    assert splits_module.check_splits(splits) == []
    for game, entry in splits["games"].items():
        dev, test = set(entry["dev"]), set(entry["test"])
        assert not dev & test
        # content, not ids: no held-out target word, slot values, problem or grid is a training instance
        held_out = dict(splits_module.items_of(splits_module.read_instances(game, entry["instances"])))
        train = {splits_module.content_key(game, i)
                 for _, i in splits_module.items_of(splits_module.read_instances(game, entry["train_instances"]))}
        assert not {splits_module.content_key(game, held_out[i]) for i in dev | test} & train
        assert dev | test == set(held_out)
        assert len(test) >= 60, game
    clusters = splits["games"]["referencegame"]["clusters"]  # a target's three positions stay together
    assert not {clusters[i] for i in splits["games"]["referencegame"]["dev"]} & \
        {clusters[i] for i in splits["games"]["referencegame"]["test"]}



def test_the_package_reads_the_protocols_splits_file_as_the_protocol_does(bench):
    """protocol-splits.json is a splits file of `playpen eval --split` / `playpen run --split`
    (issue 40: the protocol's tools in the package): every game's dev and test items and their
    instances file, as the protocol plays them."""
    from playpen.evaluation.splits import split_items
    splits_module = bench["protocol_splits"]
    for game, entry in splits_module.load_splits()["games"].items():
        for split in ("dev", "test"):
            assert split_items(splits_module.SPLITS_FILE, split, [game]) == ({game: entry[split]}, entry["instances"])

def test_the_check_finds_a_shared_item(bench):
    splits_module = bench["protocol_splits"]
    splits = splits_module.load_splits()
    taboo = splits["games"]["taboo"]
    taboo["dev"].append(taboo["test"][0])
    problems = splits_module.check_splits(splits)
    assert problems == [f"taboo: {taboo['test'][0]} is in dev and in test"]


def test_a_split_is_played_item_by_item(bench, clem_workspace, monkeypatch):
    from playpen.evaluation import evaluate
    from playpen.models import load_model_by_name
    monkeypatch.chdir(clem_workspace)
    items = ["high_en/3", "low_en/34"]  # an evaluation target and one of the protocol's new ones
    programmatic = load_model_by_name("programmatic")
    table = evaluate([programmatic], ["taboo"], results_dir=clem_workspace / "results",
                     instances="instances_protocol", items=items, run_name="split")
    assert table.games[0].num_episodes == 2
    found = bench["protocol_report"].scores_of_run(Path(table.run_dir) / "taboo", items + ["medium_en/0"])
    assert set(found["scores"]) == {*items, "medium_en/0"}
    assert found["played"] == {"high_en/3": 1, "low_en/34": 1, "medium_en/0": 0}  # not played: aborted = 0
    assert found["scores"]["medium_en/0"] == 0.0
    # taboo's first-clue rule breaks, item by item (the programmatic describer keeps the rule)
    assert found["first_clue_broke"] == {"high_en/3": 0, "low_en/34": 0, "medium_en/0": 0}
    # an episode that ended on the first clue for a taboo word (its record's keys as the master logs them)
    episode = next(Path(table.run_dir).glob("taboo/high_en/instance_*3"))
    keys = json.loads((episode / "interactions.json").read_text())
    keys.update({"End Reason": "invalid clue", "Guesses": 0})
    (episode / "interactions.json").write_text(json.dumps(keys))
    assert bench["protocol_report"].scores_of_run(Path(table.run_dir) / "taboo", items)["first_clue_broke"] == \
        {"high_en/3": 1, "low_en/34": 0}


def write_result(out, method, seed, setting, scores, trains=("taboo",), played=None):
    report = sys.modules["protocol_report"]
    game = setting.split("/")[0]
    (out / report.result_name(method, seed, setting)).write_text(json.dumps({
        "method": method, "seed": seed, "game": game, "setting": setting, "split": "test", "scores": scores,
        "played": played or {i: 1 for i in scores}, "trains": list(trains), "fingerprint": "x"}))


def test_the_report_from_the_result_files_alone(bench, tmp_path):
    protocol, report = bench["protocol"], bench["protocol_report"]
    items = [f"e/{i}" for i in range(6)]
    for seed in (1, 2, 3):
        write_result(tmp_path, "continued-sft", seed, "taboo/guesser", {i: 0.0 for i in items})
        write_result(tmp_path, "better", seed, "taboo/guesser", {i: 100.0 for i in items})
        write_result(tmp_path, "same", seed, "taboo/guesser", {i: 0.0 for i in items})
        for method in ("continued-sft", "better", "sft"):  # an untrained game: forgetting
            write_result(tmp_path, method, seed, "arith_solver/solver", {i: 50.0 for i in items},
                         played={i: int(method != "better" or i != "e/0") for i in items})
    splits = bench["protocol_splits"].load_splits()
    targets = splits["games"]["referencegame"]["clusters"]
    first, second = sorted({targets[i] for i in splits["games"]["referencegame"]["test"]})[:2]
    positions = [i for i in splits["games"]["referencegame"]["test"] if targets[i] in (first, second)]
    # the first target right at all three positions, the second only at one: 1 of 2 consistent
    right = {i: 100.0 if targets[i] == first or i == positions[-1] else 0.0 for i in positions}
    write_result(tmp_path, "better", 1, "referencegame/follower", right)
    dev = {"taboo/guesser": {"mean": 10.0, "items": 6}}
    (tmp_path / "dev-log.jsonl").write_text("\n".join(json.dumps(row) for row in [
        {"method": "sft", "seed": 1, "step": 8, "fingerprint": "w", "dev": dev, "dev_mean": 10.0},
        {"method": "sft", "seed": 1, "step": 16, "fingerprint": "w", "dev": {"taboo/guesser": {"mean": 5.0}},
         "dev_mean": 5.0},  # worse: the methods started from step 8
        *({"method": "better", "seed": 1, "step": k, "fraction": k / 4, "fingerprint": "b",
           "options": {"learning_rate": 1e-4}, "dev": {"taboo/guesser": {"mean": 10.0 + 20 * k}}}
          for k in (1, 2, 3, 4)),
        {"method": "spin", "seed": 1, "step": 8, "fraction": 1.0, "fingerprint": "s", "dev_mean": 25.0,
         "options": {"learning_rate": 5e-5}, "dev": {"taboo/guesser": {"mean": 25.0}}}]) + "\n")
    text = report.build_report(tmp_path, protocol.METHODS, protocol.SETTINGS, splits)
    assert report.dev_curves(tmp_path)[("better", "taboo/guesser")] == [
        (0.0, 10.0), (0.25, 30.0), (0.5, 50.0), (0.75, 70.0), (1.0, 90.0)]
    assert "- better `b` (seeds 1): learning_rate=0.0001" in text
    assert "- spin `s` (seeds 1): learning_rate=5e-05; dev at the full budget 25.0; dev only, never tested" in text
    assert "- better: 1 of 2 (seed by seed)" in text
    assert (tmp_path / "protocol-curves.png").stat().st_size > 1000
    rows = report.comparisons(report.load_results(tmp_path), protocol.SETTINGS, splits)
    better = rows[("better", "taboo/guesser")]
    # 6 items all better: two-sided exact p = 2/64; the family: better and same on taboo, better on
    # arith_solver (the warm-up's rows are shown, not tested) -> Holm multiplies the smallest by 3
    assert better["sign_flip_p"] == pytest.approx(2 / 64) and better["holm_p"] == pytest.approx(6 / 64)
    assert ("sft", "arith_solver/solver") in rows and "holm_p" not in rows[("sft", "arith_solver/solver")]
    assert (better["gain"], better["low"], better["high"], better["seeds"]) == (100.0, 100.0, 100.0, 3)
    assert rows[("same", "taboo/guesser")]["sign_flip_p"] == 1.0
    assert ("| better | taboo/guesser | 3 | 6 | 100.0 ± 0.0 | 100 | 0.0 | +100.0 [+100.0, +100.0] | 6/0 | 0.0312 "
            "| 0.0938 |") in text
    assert "- better: MISS (arith_solver/solver: played -16.7" in text  # 1 of 6 items no longer played
    assert (tmp_path / "protocol-gains.png").stat().st_size > 1000
    assert (tmp_path / "protocol-report.md").read_text() == text


def test_the_report_against_the_warm_up_tests_only_the_named_family(bench, tmp_path, capsys):
    """--report --against sft --family A,B: each named method against the warm-up alone, item by
    item, Holm over exactly those comparisons (the recipe's primary test); the control is not in
    the family and the protocol's own report is written as before; two baselines (study 1: two
    imitation controls) make one family of method x baseline."""
    protocol, report = bench["protocol"], bench["protocol_report"]
    items = [f"e/{i}" for i in range(8)]
    for seed in (1, 2, 3):
        write_result(tmp_path, "sft", seed, "taboo/guesser", {i: 0.0 for i in items})
        write_result(tmp_path, "continued-sft", seed, "taboo/guesser", {i: 100.0 for i in items})
        write_result(tmp_path, "expert-iteration", seed, "taboo/guesser", {i: 100.0 for i in items})
        write_result(tmp_path, "grpo-partner", seed, "taboo/guesser",  # 2 better, 6 the same
                     {i: 100.0 if i in ("e/0", "e/1") else 0.0 for i in items})
    argv = ["--report", "--settings", "taboo/guesser", "--out", str(tmp_path)]
    assert protocol.main([*argv, "--against", "sft", "--family", "expert-iteration,grpo-partner"]) == 0
    text = (tmp_path / "protocol-report--against-sft.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 2 and not any(row.startswith("| continued-sft") for row in rows)
    # all 8 items better: the exact p is 2 / 2^8; Holm over two doubles the smaller one
    assert rows[0].startswith("| expert-iteration ✓ | sft | taboo/guesser | 3 | 8 | 100.0 ± 0.0 | 0.0 | +100.0")
    assert "| 8/0 | 0.0078 | 0.0156 |" in rows[0]
    assert rows[1].startswith("| grpo-partner | sft | taboo/guesser | 3 | 8 |") and "| 2/0 | 0.5000 | 0.5000 |" in rows[1]
    assert (tmp_path / "protocol-report.md").exists()
    splits, settings = bench["protocol_splits"].load_splits(), protocol.with_primary(protocol.SETTINGS, ())
    found = report.against_baseline(report.load_results(tmp_path), settings, splits, ["sft"], ["expert-iteration"])
    assert found[("expert-iteration", "sft", "taboo/guesser")]["holm_p"] == pytest.approx(2 / 2 ** 8)
    # two baselines: expert-iteration vs sft (8 better) and vs continued-sft (all the same: p 1); Holm over 2
    found = report.against_baseline(report.load_results(tmp_path), settings, splits, ["sft", "continued-sft"],
                                    ["expert-iteration"])
    assert found[("expert-iteration", "sft", "taboo/guesser")]["holm_p"] == pytest.approx(2 * 2 / 2 ** 8)
    assert found[("expert-iteration", "continued-sft", "taboo/guesser")]["holm_p"] == 1.0
    assert protocol.main([*argv, "--against", "sft,continued-sft", "--family", "expert-iteration"]) == 0
    assert "Holm over the 2 comparisons" in (tmp_path / "protocol-report--against-sft+continued-sft.md").read_text()
    capsys.readouterr()
    for bad in (["--against", "sft"], ["--against", "nope", "--family", "grpo-partner"],
                ["--against", "sft", "--family", "sft,grpo-partner"], ["--family", "grpo-partner"]):
        assert protocol.main([*argv, *bad]) == 2
        assert capsys.readouterr().err.startswith("protocol.py: --against")
    assert protocol.main(["--against", "sft", "--family", "grpo-partner", "--out", str(tmp_path)]) == 2


def test_bad_arguments_exit_2(bench, tmp_path, capsys):
    protocol = bench["protocol"]
    assert protocol.main(["--methods", "nope", "--out", str(tmp_path)]) == 2
    assert "unknown method(s) ['nope']" in capsys.readouterr().err
    # patience 0 would stop at the first chunk without a gain here and never in SFT's --dev-patience
    assert protocol.main(["--warmup-patience", "0", "--out", str(tmp_path)]) == 2
    assert "--warmup-patience must be >= 1" in capsys.readouterr().err
    assert protocol.main(["--quick"]) == 2  # plumbing never lands in the published results
    assert "pass --out DIR" in capsys.readouterr().err
    assert protocol.main(["--settings", "taboo/narrator", "--out", str(tmp_path)]) == 2
    assert "unknown setting(s) ['taboo/narrator']; known: taboo/guesser," in capsys.readouterr().err
    assert protocol.main(["--choice-only", "--settings", "taboo/guesser", "--out", str(tmp_path)]) == 2
    assert "--choice needs the referencegame/follower setting among --settings" in capsys.readouterr().err
    assert protocol.main(["--add-only", "--out", str(tmp_path)]) == 2
    assert "--add-only needs --add-settings" in capsys.readouterr().err
    # --primary names settings of this run only
    assert protocol.main(["--settings", "taboo/guesser", "--primary", "taboo/describer", "--out", str(tmp_path)]) == 2
    assert "--primary 'taboo/describer': expected settings of this run's --settings: taboo/guesser" \
        in capsys.readouterr().err
    assert protocol.main(["--primary", "taboo/narrator", "--out", str(tmp_path)]) == 2
    for bad in (["--retention-settings", "wordle/critic"], ["--checkpoints", "0"], ["--retention-prompts", "0"]):
        assert protocol.main([*bad, "--retention-only", "--out", str(tmp_path)]) == 2
        assert "--retention-prompts >= 1 and --checkpoints >= 1 expected" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # refused before anything is written


def test_a_selection_narrows_the_games_and_joins_the_fingerprint(bench):
    """--train-games narrows each method's games (none left: refused); the selection is part of
    the fingerprints, and a run without one keeps the keys that full runs had."""
    protocol = bench["protocol"]
    full = SimpleNamespace(settings=protocol.SETTINGS, train_games=())
    narrow = SimpleNamespace(settings=protocol.SETTINGS[:1], train_games=("taboo", "referencegame"))
    assert protocol.method_of("expert-iteration", full) is protocol.METHODS["expert-iteration"]
    method = protocol.method_of("expert-iteration", narrow)
    assert method.options["games"] == "taboo" and method.trains == ("taboo",)
    assert method.options["roles"] == "Guesser"  # taboo has no Answerer or Solver: its trainer would refuse them
    assert method.options["samples_per_instance"] == protocol.METHODS["expert-iteration"].options["samples_per_instance"]
    assert protocol.method_of("sft", narrow).options["games"] == "taboo,referencegame"
    assert protocol.selection_key(full) == ()
    assert protocol.selection_key(narrow, "continued-sft") == (("taboo/guesser",), ("taboo", "referencegame"))
    with pytest.raises(SystemExit, match="trains none of --train-games privateshared"):
        protocol.method_of("expert-iteration-selfplay", SimpleNamespace(settings=(), train_games=("privateshared",)))


def test_primary_names_the_dev_criterion_and_the_holm_family(bench):
    """--primary: the named settings alone are primary for the methods' dev and the report's Holm
    family; the warm-up stops on the default family while one is selected (its key unchanged), on
    the named one otherwise (its key changes); --checkpoints N: the fractions every 1/N, 4 by default."""
    protocol, report = bench["protocol"], bench["protocol_report"]
    chosen = tuple(s for s in protocol.SETTINGS if s.name in ("taboo/guesser", "referencegame/follower"))
    rows = {"taboo/guesser": {"scores": {"a": 100.0, "b": 50.0}}, "referencegame/follower": {"scores": {"c": 0.0}}}
    follower = protocol.with_primary(chosen, ("referencegame/follower",))
    assert protocol.dev_mean(rows, chosen) == 75.0 and protocol.dev_mean(rows, follower) == 0.0
    args = lambda settings: SimpleNamespace(settings=settings, train_games=("taboo",))  # noqa: E731
    assert protocol.primary_key(args(chosen)) == ()
    assert protocol.primary_key(args(protocol.with_primary(chosen, ("taboo/guesser",)))) == ()
    # the warm-up keeps stopping on the default family while one is selected: same key, shared warm-ups
    assert protocol.primary_key(args(follower)) == ()
    assert [s.name for s in protocol.warm_up_settings(args(follower))] == ["taboo/guesser"]
    alone = protocol.with_primary(chosen[1:], ("referencegame/follower",))  # no default family selected
    assert protocol.primary_key(args(alone)) == (("primary", ("referencegame/follower",)),)
    assert [s.name for s in protocol.warm_up_settings(args(alone))] == ["referencegame/follower"]
    assert protocol.selection_key(args(follower)) == protocol.selection_key(args(chosen))
    assert protocol.with_primary(protocol.SETTINGS, ()) is protocol.SETTINGS
    results = {}
    for method, score in (("continued-sft", 0.0), ("better", 100.0)):
        for setting in ("taboo/guesser", "referencegame/follower"):
            results[(method, setting)] = {1: {"scores": {f"e/{i}": score for i in range(6)},
                                              "played": {f"e/{i}": 1 for i in range(6)}}}
    splits = bench["protocol_splits"].load_splits()
    default = report.comparisons(results, protocol.SETTINGS, splits)
    named = report.comparisons(results, protocol.with_primary(protocol.SETTINGS, ("referencegame/follower",)), splits)
    assert "holm_p" in default[("better", "taboo/guesser")] and "holm_p" not in default[("better", "referencegame/follower")]
    assert "holm_p" in named[("better", "referencegame/follower")] and "holm_p" not in named[("better", "taboo/guesser")]
    assert protocol.fractions(SimpleNamespace(checkpoints=None)) == (0.25, 0.5, 0.75, 1.0)
    assert protocol.fractions(SimpleNamespace(checkpoints=8))[:2] == (0.125, 0.25)


@pytest.mark.parametrize("file", sorted(p.name for p in BENCHMARKS.glob("*methods.json")))
def test_every_method_of_the_methods_file_builds_a_valid_trainer_config(bench, tmp_path, file, monkeypatch):
    """protocol-methods.json and each study's file: each entry's trainer is packaged and its
    options make a config that passes the trainer's own checks (as configure() builds it, budget
    and run folder added); a study shares the protocol's warm-ups, so its 'sft' is the protocol's
    unless the study changes the warm-up on purpose (study 2: scarce demonstrations)."""
    protocol = bench["protocol"]
    methods = protocol.load_methods(BENCHMARKS / file)
    args = SimpleNamespace(quick=False, budget_examples=512, learner="smol-135m", checkpoints=None)
    assert {protocol.WARM_UP, protocol.CONTROL} <= set(methods) and len(methods) > 2
    if file == "study-describer-methods.json":
        assert methods[protocol.WARM_UP] == protocol.METHODS[protocol.WARM_UP]
        assert methods[protocol.CONTROL] == protocol.METHODS[protocol.CONTROL]
    # a study runs with --train-games taboo,referencegame (its plan): its methods as that run narrows them
    monkeypatch.setattr(protocol, "METHODS", methods)
    games = SimpleNamespace(train_games=("taboo", "referencegame") if file.startswith("study-") else ())
    for name in methods:
        method = protocol.method_of(name, games)
        cls, config, options = protocol.configure(name, method, args, tmp_path / name, None, None)
        assert set(method.trains) <= set(config.game_list), name
        assert options["max_steps"] >= 1 and all(getattr(config, k) == v for k, v in method.options.items()), name


@pytest.mark.parametrize("text, expected", [
    ("{oops", "not a methods file"),
    ('{"methods": {"sft": {"trainer": "sft", "option": {}}}}', "method 'sft': expected an object"),
    ('{"methods": {"sft": {"trainer": "sft"}}}', "missing: continued-sft"),
])
def test_a_malformed_methods_file_is_refused_naming_file_and_entry(bench, tmp_path, text, expected):
    path = tmp_path / "methods.json"
    path.write_text(text)
    with pytest.raises(SystemExit, match=expected):
        bench["protocol"].load_methods(path)


def test_the_describer_configuration_learns_the_describer_with_the_programmatic_guesser(bench, tmp_path):
    """expert-iteration-describer: the selection keeps its role (it is taboo's Describer, not a
    learner role the narrowing drops), the programmatic partner guesses, and the budget's 128
    examples are 16 steps of 8 conversations over 4 rounds; the trainer's own checks pass
    without a model loaded."""
    protocol = bench["protocol"]
    args = SimpleNamespace(settings=protocol.SETTINGS[:1], train_games=("taboo", "referencegame"), quick=False,
                           budget_examples=128, learner="smol-135m", checkpoints=None)
    method = protocol.method_of("expert-iteration-describer", args)
    assert method.teacher == "programmatic" and method.trains == ("taboo",)
    cls, config, _ = protocol.configure("expert-iteration-describer", method, args, tmp_path, None, None)
    assert cls.__name__ == "ExpertIterationTrainer"
    assert (config.roles, config.game_list, config.max_steps, config.rounds) == ("Describer", ["taboo"], 16, 4)
    with pytest.raises(SystemExit, match="trains none of --train-games arith_solver"):
        protocol.method_of("expert-iteration-describer", SimpleNamespace(settings=(), train_games=("arith_solver",)))


# the end-to-end run's settings: a trained role with a partner (the primary family), one the random
# model cannot feed (expert iteration records a failure), the diagnostic the choice stage reads
E2E_SETTINGS = ("--settings", "taboo/guesser,arith_solver/solver,referencegame/follower")


def test_the_runner_end_to_end_with_a_tiny_model(bench, tiny_workspace):
    """--quick: the warm-up (2 chunks of 1 step, dev after each), the control and expert
    iteration (which the random model cannot feed: nothing won, recorded as failed) at a
    budget of 8 examples, dev curves, test results per setting and the report; then the
    forgetting stage after the fact on what finished, in files of its own."""
    protocol = bench["protocol"]
    out = tiny_workspace / "protocol"
    assert protocol.main(["--quick", "-l", "tiny-random", "--seeds", "7", "--methods", "expert-iteration",
                          *E2E_SETTINGS, "--out", str(out)]) == 0
    results = sorted(p.name for p in out.glob("*.json"))
    assert len(results) == 3 * 3  # sft, continued-sft, expert-iteration; three settings
    control = json.loads((out / "continued-sft--seed7--taboo--guesser.json").read_text())
    assert {k: control[k] for k in ("method", "seed", "game", "setting", "split")} == {
        "method": "continued-sft", "seed": 7, "game": "taboo", "setting": "taboo/guesser", "split": "test"}
    splits = bench["protocol_splits"].load_splits()
    assert list(control["scores"]) == splits["games"]["taboo"]["test"][:2]
    assert control["steps"] == 4 and [p["fraction"] for p in control["dev_curve"]] == [0.25, 0.5, 0.75, 1.0]
    ei = json.loads((out / "expert-iteration--seed7--arith_solver--solver.json").read_text())
    assert "won no episode" in ei["failed"]
    log = [json.loads(line) for line in (out / "dev-log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if r["method"] == "sft"] == [1, 2]
    assert "| continued-sft" not in (out / "protocol-report.md").read_text()
    assert "| expert-iteration (failed: the warm-up unchanged) | taboo/guesser |" in (out / "protocol-report.md").read_text()
    # a second run finds everything cached; a changed configuration under the same name is refused
    assert protocol.main(["--quick", "-l", "tiny-random", "--seeds", "7", "--methods", "expert-iteration",
                          *E2E_SETTINGS, "--out", str(out)]) == 0
    check_forgetting_stage(bench, out)
    check_choice_stage(bench, out)
    check_retention_stage(bench, out)
    check_drift_stage(bench, out)
    with pytest.raises(SystemExit, match="played once per configuration"):
        protocol.main(["--quick", "-l", "tiny-random", "--seeds", "7", "--methods", "expert-iteration",
                       *E2E_SETTINGS, "--out", str(out), "--max-tokens", "6"])


def test_an_error_of_the_run_stops_it_instead_of_recording_a_failed_method(bench, tiny_workspace, monkeypatch, capsys):
    """Only a method whose play gave it nothing to learn (DatasetError) is recorded as failed with
    the warm-up's scores; any other error of a training run (here the control's folder locked by
    another run) stops the protocol with one line and exit 1, and writes no result for it."""
    from playpen.errors import RunLockedError
    protocol = bench["protocol"]
    real_train = protocol.train

    def train(cls, config, method, *rest):
        if getattr(config, "init_adapter", ""):  # the control: it starts from the warm-up
            raise RunLockedError("models/continued-sft is in use by another run (PID 1)")
        return real_train(cls, config, method, *rest)

    monkeypatch.setattr(protocol, "train", train)
    out = tiny_workspace / "protocol-locked"
    assert protocol.main(["--quick", "-l", "tiny-random", "--seeds", "9", "--methods", "continued-sft",
                          "--settings", "taboo/guesser", "--out", str(out)]) == 1
    assert "protocol.py: models/continued-sft is in use by another run (PID 1)" in capsys.readouterr().err
    assert (out / "sft--seed9--taboo--guesser.json").exists()  # the warm-up finished and keeps its result
    assert not list(out.glob("continued-sft--*.json"))


def test_a_signal_that_stops_a_training_run_stops_the_protocol(bench, tiny_workspace, monkeypatch, capsys):
    """Ctrl-C or SIGTERM in a training run: the trainer saves and returns with ``interrupted_by``
    set; the protocol then stops with one line and 128 + the signal, instead of looking for the
    chunk's checkpoint and failing on it; nothing is logged or written as a result."""
    import signal

    protocol = bench["protocol"]
    from playpen.training import catalog
    cls = catalog.trainer_class("sft")

    def learn(self, *args, **kwargs):
        self.interrupted_by = signal.SIGTERM
    monkeypatch.setattr(cls, "learn", learn)
    out = tiny_workspace / "protocol-stopped"
    assert protocol.main(["--quick", "-l", "tiny-random", "--seeds", "9", "--methods", "continued-sft",
                          "--settings", "taboo/guesser", "--out", str(out)]) == 143
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("protocol.py")]
    assert said == ["protocol.py: interrupted by SIGTERM; what finished is cached, the same command goes on"]
    assert not (out / "dev-log.jsonl").exists() and not list(out.glob("*--seed9--*.json"))


def check_foreign_checkpoints(bench, out, argv, capsys):
    """--start-step trains another configuration of the same method into the method's folder (in a
    copy of the run, the original goes on): the screened configuration's test then trains it again
    instead of testing the other one's checkpoints (the folder's key file names their configuration)."""
    copy = out.parent / "protocol-dev-start-step"
    shutil.copytree(out, copy)
    argv = [str(copy) if a == str(out) else a for a in argv]
    check_start_step(bench, copy, argv, capsys)
    assert bench["protocol"].main([a for a in argv if a != "--dev-only"]) == 0
    said = capsys.readouterr().out
    assert "screened on dev before" not in said and "continued-sft seed 8: 4 steps of" in said
    assert json.loads((copy / "continued-sft--seed8--taboo--guesser.json").read_text())["train_seconds"] > 0


def check_start_step(bench, out, argv, capsys):
    """--start-step N: the method starts from the warm-up's checkpoint after N steps (here the one
    that is not its best), under a key of its own, its dev rows naming the start; a step the
    warm-up did not keep is one line and exit 1."""
    protocol = bench["protocol"]
    best = Path(json.loads((out / "work" / "seed-8" / "warm-up.json").read_text())["adapter"]).name
    other = 2 if best == "checkpoint-1" else 1
    before = [json.loads(line) for line in (out / "dev-log.jsonl").read_text().splitlines()]
    assert protocol.main([*argv, "--start-step", str(other)]) == 0
    rows = [json.loads(line) for line in (out / "dev-log.jsonl").read_text().splitlines()][len(before):]
    assert [r["fraction"] for r in rows] == [0.25, 0.5, 0.75, 1.0]
    assert {r["start"] for r in rows} == {f"checkpoint-{other}"}
    assert {r["fingerprint"] for r in rows}.isdisjoint({r["fingerprint"] for r in before})
    capsys.readouterr()
    assert protocol.main([*argv, "--start-step", "5"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("protocol.py: --start-step 5: the warm-up has no checkpoint there")


def test_dev_only_screens_without_touching_the_test_split(bench, tiny_workspace, capsys):
    """--dev-only: the warm-up and the method train and log their dev curves; no test result
    is written (the warm-up's neither); a second run finds the curve and trains nothing."""
    protocol = bench["protocol"]
    out = tiny_workspace / "protocol-dev"
    argv = ["--quick", "-l", "tiny-random", "--seeds", "8", "--methods", "continued-sft",
            "--settings", "taboo/guesser", "--dev-only", "--out", str(out)]
    assert protocol.main(argv) == 0
    assert list(out.glob("*--seed8--*.json")) == []
    log = [json.loads(line) for line in (out / "dev-log.jsonl").read_text().splitlines()]
    control = [r for r in log if r["method"] == "continued-sft"]
    assert [r["fraction"] for r in control] == [0.25, 0.5, 0.75, 1.0]
    assert all(r["train_seconds"] > 0 and r["dev"]["taboo/guesser"]["items"] == 2
               == len(r["dev"]["taboo/guesser"]["scores"]) for r in control)
    check_arm_resumes(bench, out, argv, capsys)
    # an interrupted warm-up (its marker not yet written) goes on from the chunks the dev log holds
    (out / "work" / "seed-8" / "warm-up.json").unlink()
    assert protocol.main(argv) == 0
    said = capsys.readouterr().out
    assert "seed 8 warm-up: 1 steps, dev" in said and said.count("(logged before)") == 2
    assert "continued-sft seed 8: dev curve cached (--dev-only)" in said
    assert len((out / "dev-log.jsonl").read_text().splitlines()) == len(log)
    check_checkpoints(bench, out, argv, capsys)
    log = [json.loads(line) for line in (out / "dev-log.jsonl").read_text().splitlines()]
    check_retrained_warm_up(bench, out, argv, capsys)
    check_foreign_checkpoints(bench, out, argv, capsys)
    # without --dev-only the screened checkpoint plays the test split, nothing retrained
    assert protocol.main([a for a in argv if a != "--dev-only"]) == 0
    assert "continued-sft seed 8: screened on dev before, its 4-step checkpoint to test" in capsys.readouterr().out
    control = json.loads((out / "continued-sft--seed8--taboo--guesser.json").read_text())
    assert control["steps"] == 4 and [p["fraction"] for p in control["dev_curve"]] == [0.25, 0.5, 0.75, 1.0]
    assert control["train_seconds"] == log[-1]["train_seconds"] and len(control["scores"]) == 2
    assert (out / "sft--seed8--taboo--guesser.json").exists()  # the warm-up's test, once, now
    check_added_setting(bench, out, argv)


def check_arm_resumes(bench, out, argv, capsys):
    """An arm killed after training, while its dev was played (nothing logged): the next start
    trains nothing, plays the same checkpoints (none rewritten) and logs the same item scores;
    one killed during training (its last checkpoint not saved) continues from its last one."""
    protocol, log_file = bench["protocol"], out / "dev-log.jsonl"
    models = out / "work" / "seed-8" / "models" / "continued-sft"
    rows = [json.loads(line) for line in log_file.read_text().splitlines()]
    control = [r for r in rows if r["method"] == "continued-sft"]

    def forget_the_arms_rows():
        log_file.write_text("".join(json.dumps(r) + "\n" for r in rows if r["method"] != "continued-sft"))

    def played_again():
        capsys.readouterr()
        assert protocol.main(argv) == 0
        again = [json.loads(line) for line in log_file.read_text().splitlines()][len(rows) - len(control):]
        assert [(r["step"], r["fraction"], r["dev"]) for r in again] == \
            [(r["step"], r["fraction"], r["dev"]) for r in control]
        return capsys.readouterr().out, again
    files = {p: p.stat().st_mtime_ns for p in models.rglob("checkpoint-*/*")}
    forget_the_arms_rows()
    said, again = played_again()
    assert "== continued-sft seed 8: trained before (same configuration), its checkpoints played" in said
    assert {p: p.stat().st_mtime_ns for p in models.rglob("checkpoint-*/*")} == files
    assert {r["train_seconds"] for r in again} == {None} and not any("resumed_from" in r for r in again)
    # killed before its last step: it goes on from checkpoint-3
    import shutil
    shutil.rmtree(next(models.rglob("checkpoint-4")))
    forget_the_arms_rows()
    said, again = played_again()
    assert "== continued-sft seed 8: resumed after 3 of 4 steps (same configuration)" in said
    assert next(models.rglob("checkpoint-4")).is_dir() and {r["resumed_from"] for r in again} == {3}
    assert {p: p.stat().st_mtime_ns for p in models.rglob("checkpoint-[123]/*")} == \
        {p: t for p, t in files.items() if "checkpoint-4" not in str(p)}
    capsys.readouterr()


def check_checkpoints(bench, out, argv, capsys):
    """--primary naming the default family keeps every key (all cached); --checkpoints 8: the
    control's dev at every eighth of its budget, 8 rows logged (a checkpoint nearest two
    fractions played once; at 4 steps its options are the default's, so the same configuration:
    its checkpoints are played, nothing trained, its logged training seconds kept)."""
    protocol = bench["protocol"]
    lines = len((out / "dev-log.jsonl").read_text().splitlines())
    capsys.readouterr()
    assert protocol.main([*argv, "--primary", "taboo/guesser"]) == 0
    assert "continued-sft seed 8: dev curve cached (--dev-only)" in capsys.readouterr().out
    assert len((out / "dev-log.jsonl").read_text().splitlines()) == lines
    before = [json.loads(line) for line in (out / "dev-log.jsonl").read_text().splitlines()][-1]
    assert protocol.main([*argv, "--checkpoints", "8"]) == 0
    assert "continued-sft seed 8: trained before (same configuration)" in capsys.readouterr().out
    log = [json.loads(line) for line in (out / "dev-log.jsonl").read_text().splitlines()][lines:]
    assert before["train_seconds"] is not None and {r["train_seconds"] for r in log} == {before["train_seconds"]}
    assert [r["fraction"] for r in log] == [k / 8 for k in range(1, 9)] and {r["method"] for r in log} == {"continued-sft"}
    assert [r["step"] for r in log] == [1, 1, 2, 2, 3, 3, 4, 4]  # 4 steps: the nearest checkpoint, the later on a tie
    assert log[0]["dev"] == log[1]["dev"] and all(len(r["dev"]["taboo/guesser"]["scores"]) == 2 for r in log)


def check_retrained_warm_up(bench, out, argv, capsys):
    """A warm-up whose checkpoints are gone but whose dev rows are logged (the same
    configuration): every chunk is trained again and none is played on dev again but the chosen
    one, which must score its logged dev (one row more, every item's score); a logged score the
    retrained adapter does not reproduce stops the run. The methods from it stay cached."""
    import shutil
    protocol = bench["protocol"]
    seed_dir, log_file = out / "work" / "seed-8", out / "dev-log.jsonl"
    best = int(Path(json.loads((seed_dir / "warm-up.json").read_text())["adapter"]).name.split("-")[1])

    def forget():
        shutil.rmtree(seed_dir / "models" / "sft")
        (seed_dir / "warm-up.json").unlink()
    forget()
    lines = len(log_file.read_text().splitlines())
    capsys.readouterr()
    assert protocol.main(argv) == 0
    said = capsys.readouterr().out
    assert said.count("(logged before; retrained)") == 2
    assert said.count("(retrained, played again: the logged score)") == 1
    assert "continued-sft seed 8: dev curve cached (--dev-only)" in said
    rows = [json.loads(line) for line in log_file.read_text().splitlines()][lines:]
    assert [(r["method"], r["step"]) for r in rows] == [("sft", best)] and "checked" in rows[0]
    assert len(rows[0]["dev"]["taboo/guesser"]["scores"]) == 2
    # a logged score that the retrained adapter does not reproduce
    text = log_file.read_text()
    forget()
    tampered = [json.loads(line) for line in text.splitlines()]
    for r in tampered:
        if r["method"] == "sft" and r["seed"] == 8 and r["step"] == best:
            r["dev_mean"] += 50
    log_file.write_text("".join(json.dumps(r) + "\n" for r in tampered))
    with pytest.raises(SystemExit, match=f"checkpoint-{best}, trained again, scores .* is not the logged one"):
        protocol.main(argv)
    log_file.write_text(text)
    assert protocol.main(argv) == 0  # its checkpoints are there now: logged before, nothing trained


def check_added_setting(bench, out, argv):
    """--add-only --add-settings: the finished configurations (warm-up and control) play the
    added setting's test split once, in result files marked added with their configuration's
    fingerprint; their own results untouched; the report's row says so; cached on a second run;
    a selected setting cannot be added."""
    protocol = bench["protocol"]
    run = [a for a in argv if a != "--dev-only"] + ["--add-settings", "taboo/self-play"]
    tested = {p.name: p.read_bytes() for p in out.glob("*--seed8--*.json")}
    assert protocol.main([*run, "--add-only"]) == 0
    assert {p.name: p.read_bytes() for p in out.glob("*--seed8--*guesser.json")} == tested
    items = bench["protocol_splits"].load_splits()["games"]["taboo"]["test"][:2]
    for name in ("sft", "continued-sft"):
        added = json.loads((out / f"{name}--seed8--taboo--self-play.json").read_text())
        own = json.loads(tested[f"{name}--seed8--taboo--guesser.json"])
        assert added["added"] is True and added["setting"] == "taboo/self-play" and added["split"] == "test"
        assert added["fingerprint"] == own["fingerprint"] and added["steps"] == own["steps"]
        assert sorted(added["scores"]) == sorted(items) and set(added["played"].values()) <= {0, 1}
    assert "| sft | taboo/self-play (added) | 1 | 2 |" in (out / "protocol-report.md").read_text()
    stamp = (out / "sft--seed8--taboo--self-play.json").stat().st_mtime_ns
    assert protocol.main([*run, "--add-only"]) == 0
    assert (out / "sft--seed8--taboo--self-play.json").stat().st_mtime_ns == stamp
    assert protocol.main([*argv, "--add-only", "--add-settings", "taboo/guesser"]) == 2
    # the report of a folder reads every setting its result files hold, not only the selected ones
    (out / "protocol-report.md").unlink()
    assert protocol.main([a for a in argv if a != "--dev-only"] + ["--report"]) == 0
    assert "| sft | taboo/self-play (added) | 1 | 2 |" in (out / "protocol-report.md").read_text()


def check_forgetting_stage(bench, out):
    """--forgetting-only on the finished seed: the base model and the three final
    configurations measured on the out-of-domain games no method trains and the static task,
    each in its own file; the test results untouched; a second run (--forgetting, the loop)
    finds them cached; a changed setting measures again."""
    protocol = bench["protocol"]
    run = ["--quick", "-l", "tiny-random", "--seeds", "7", "--methods", "expert-iteration", *E2E_SETTINGS,
           "--out", str(out)]
    tested = {p.name: p.read_bytes() for p in out.glob("*--seed7--*.json")}
    marker = (out / "work" / "seed-7" / "warm-up.json").read_bytes()
    assert protocol.main([*run, "--forgetting-only"]) == 0
    assert {p.name: p.read_bytes() for p in out.glob("*--seed7--*.json") if not p.name.startswith("forgetting--")} \
        == tested and (out / "work" / "seed-7" / "warm-up.json").read_bytes() == marker
    files = sorted(p.name for p in out.glob("forgetting--*.json"))
    assert files == ["forgetting--base.json", "forgetting--continued-sft--seed7.json",
                     "forgetting--expert-iteration--seed7.json", "forgetting--sft--seed7.json"]
    found = {name: json.loads((out / name).read_text()) for name in files}
    warm_adapter = json.loads(marker)["adapter"]
    for data in found.values():
        assert data["games"] == ["adversarial_taboo", "debate", "negotiation", "redblue", "refine", "arith_proposer"]
        assert data["num_episodes"] == 14 and data["percent_played"] >= 0  # 1 instance per experiment
        assert data["static_tasks"] == ["playpen_word_clues"] and data["num_questions"] == 4
        assert 0 <= data["statscore"] <= 1 and (Path(data["results_dir"]) / "playpen-static.json").exists()
    assert found["forgetting--base.json"]["adapter"] is None
    assert found["forgetting--sft--seed7.json"]["adapter"] == str(Path(warm_adapter).relative_to(out / "work"))
    control = found["forgetting--continued-sft--seed7.json"]
    assert control["adapter"].startswith("seed-7/models/continued-sft/") and control["adapter"].endswith("checkpoint-4")
    tested_control = json.loads(tested["continued-sft--seed7--taboo--guesser.json"])
    assert control["config_fingerprint"] == tested_control["fingerprint"]
    failed = found["forgetting--expert-iteration--seed7.json"]  # it trained nothing: the warm-up's adapter
    assert failed["failed"] is True and failed["adapter"] == found["forgetting--sft--seed7.json"]["adapter"]
    report = (out / "protocol-report.md").read_text()
    base, sft = found["forgetting--base.json"], found["forgetting--sft--seed7.json"]
    assert "Forgetting beyond the protocol's games: the clemscore of the out_of_domain set's games" in report
    assert f"| base model | — | {base['clemscore']:.1f} | — | {base['statscore']:.3f} | — |" in report
    assert (f"| sft (warm-up) | 1 | {base['clemscore']:.1f} -> {sft['clemscore']:.1f} ± 0.0 | — | "
            f"{base['statscore']:.3f} -> {sft['statscore']:.3f} ± 0.000 | — |") in report
    assert "| continued-sft | 1 | " in report
    assert "| expert-iteration (failed: the warm-up's adapter) | 1 | " in report
    # cached: the loop's --forgetting measures nothing again; a changed setting does
    stamps = {name: (out / name).stat().st_mtime_ns for name in files}
    assert protocol.main([*run, "--forgetting"]) == 0
    assert {name: (out / name).stat().st_mtime_ns for name in files} == stamps
    assert protocol.main([*run, "--forgetting-only", "--forgetting-static-limit", "2"]) == 0
    assert all(json.loads((out / name).read_text())["num_questions"] == 2 for name in files)


def check_choice_stage(bench, out):
    """--choice-only on the finished seed: the follower's forced choice for the base model and
    the three final configurations over the test items it played, each in its own file, the
    test results untouched, the report's table; cached on a second run."""
    protocol = bench["protocol"]
    run = ["--quick", "-l", "tiny-random", "--seeds", "7", "--methods", "expert-iteration", *E2E_SETTINGS,
           "--out", str(out)]
    tested = {p.name: p.read_bytes() for p in out.glob("*--seed7--*.json") if not p.name.startswith("forgetting--")}
    assert protocol.main([*run, "--choice-only"]) == 0
    assert {p.name: p.read_bytes() for p in out.glob("*--seed7--*.json")
            if not p.name.startswith(("forgetting--", "choice--"))} == tested
    files = sorted(p.name for p in out.glob("choice--*.json"))
    assert files == ["choice--base.json", "choice--continued-sft--seed7.json", "choice--expert-iteration--seed7.json",
                     "choice--sft--seed7.json"]
    items = bench["protocol_splits"].load_splits()["games"]["referencegame"]["test"][:2]
    for name in files:
        data = json.loads((out / name).read_text())
        assert sorted(data["scores"]) == sorted(items) and data["setting"] == "referencegame/follower"
        assert all(0 < p < 1 for p in data["scores"].values()) and set(data["choice"].values()) <= {1, 2, 3}
        assert all(len(v) == 3 and max(v) < 0 for v in data["logprobs"].values())
        assert all(data["correct"][i] == int(data["choice"][i] == data["target"][i]) for i in items)
    control = json.loads((out / "choice--continued-sft--seed7.json").read_text())
    assert control["config_fingerprint"] == json.loads(tested["continued-sft--seed7--taboo--guesser.json"])["fingerprint"]
    base = json.loads((out / "choice--base.json").read_text())
    assert base["adapter"] is None and base["scores"] != control["scores"]  # the adapter is applied
    assert "Diagnostic: the referencegame follower's forced choice" in (out / "protocol-report.md").read_text()
    stamps = {name: (out / name).stat().st_mtime_ns for name in files}
    assert protocol.main([*run, "--choice"]) == 0  # the loop: cached
    assert {name: (out / name).stat().st_mtime_ns for name in files} == stamps


def check_drift_stage(bench, out):
    """--drift-only on the finished seed: per setting, the log-probability per token of the
    warm-up's own greedy test replies under each final configuration, item by item; the failed
    method (the warm-up's adapter) changes nothing, exactly; the control's changes are finite and
    not all 0; each summary row is its items' differences; the other files untouched."""
    protocol = bench["protocol"]
    tested = {p.name: p.read_bytes() for p in out.glob("*.json")}
    assert protocol.main(["--quick", "-l", "tiny-random", "--seeds", "7", "--methods", "expert-iteration",
                          *E2E_SETTINGS, "--out", str(out), "--drift-only"]) == 0
    assert {name: (out / name).read_bytes() for name in tested} == tested
    report = json.loads((out / "drift--seed7.json").read_text())
    assert report["seed"] == 7 and report["learner"] == "tiny-random"
    assert report["adapters"]["sft"] == json.loads((out / "work" / "seed-7" / "warm-up.json").read_text())["adapter"]
    assert report["adapters"]["expert-iteration"] == report["adapters"]["sft"]  # failed: the warm-up unchanged
    assert report["adapters"]["continued-sft"].endswith("checkpoint-4")
    assert list(report["settings"]) == E2E_SETTINGS[1].split(",")
    moved = 0
    for setting, found in report["settings"].items():
        items, game = found["items"], setting.split("/")[0]
        assert set(items) == {"sft", "continued-sft", "expert-iteration"}
        assert set(found["changes"]) == {"continued-sft", "expert-iteration"}
        start = items["sft"]
        assert start and found["turns"] >= len(start) and all(i.startswith(game + "/") for i in start)
        assert all(set(values) == set(start) and all(math.isfinite(v) and v < 0 for v in values.values())
                   for values in items.values())
        assert items["expert-iteration"] == start  # the warm-up's adapter against itself: exactly 0
        failed, control = found["changes"]["expert-iteration"], found["changes"]["continued-sft"]
        assert (failed["items"], failed["mean_change"], failed["rose"], failed["fell"], failed["p"]) == \
            (len(start), 0.0, 0, 0, 1.0)
        assert failed["mean_logprob"] == failed["start_mean_logprob"] == pytest.approx(sum(start.values()) / len(start))
        differences = [items["continued-sft"][i] - start[i] for i in start]
        assert control["items"] == len(start) and control["mean_change"] == pytest.approx(sum(differences) / len(start))
        assert (control["rose"], control["fell"]) == (sum(d > 0 for d in differences), sum(d < 0 for d in differences))
        assert 0 < control["p"] <= 1 and math.isfinite(control["mean_change"])
        assert (failed["trains_this_game"], control["trains_this_game"]) == (
            game in protocol.METHODS["expert-iteration"].trains, game in protocol.METHODS["continued-sft"].trains)
        moved += sum(d != 0 for d in differences)
    assert moved > 0  # the control's four steps of SFT moved the warm-up's replies somewhere


def check_retention_stage(bench, out):
    """--retention-only on the finished seed: the base model's first-turn replies to 2 held-out
    items of each retention setting, once; the log-probability of each under the base model,
    the warm-up, each of the control's kept checkpoints (--checkpoints) and the failed method
    (the warm-up's adapter), a file each; the warm-up's values are what its adapter gives
    (0 difference), the control's differ on every prompt; the test results untouched; cached."""
    from playpen.evaluation.retention import adapters_logprobs, turn_rows
    from playpen.models import load_model_by_name
    protocol, retention = bench["protocol"], importlib.import_module("protocol_retention")
    run = ["--quick", "-l", "tiny-random", "--seeds", "7", "--methods", "expert-iteration", *E2E_SETTINGS,
           "--out", str(out), "--retention-only", "--retention-prompts", "2", "--checkpoints", "4"]
    tested = {p.name: p.read_bytes() for p in out.glob("*.json")}
    assert protocol.main(run) == 0
    assert {name: (out / name).read_bytes() for name in tested} == tested
    prompts = json.loads((out / "retention-prompts--tiny-random.json").read_text())
    by_setting = {}
    for record in prompts["records"]:
        by_setting.setdefault(record["setting"], []).append(record["item"])
        assert [m["role"] for m in record["messages"]][-1] == "assistant" and len(record["messages"]) >= 2
    assert list(by_setting) == list(retention.RETENTION_SETTINGS)
    for name, items in by_setting.items():
        assert 1 <= len(items) <= 2 and set(items) <= set(retention.held_out_items(retention.RETENTION_SETTINGS[name], 10**6))
    warm_step = int(Path(json.loads((out / "work" / "seed-7" / "warm-up.json").read_text())["adapter"]).name[11:])
    files = sorted(p.name for p in out.glob("retention--*.json"))
    assert files == sorted(["retention--base.json", *(f"retention--continued-sft--seed7--{k}.json" for k in (1, 2, 3, 4)),
                            f"retention--expert-iteration--seed7--{warm_step}.json", f"retention--sft--seed7--{warm_step}.json"])
    found = {name: json.loads((out / name).read_text()) for name in files}
    warm, control = found[f"retention--sft--seed7--{warm_step}.json"], found["retention--continued-sft--seed7--4.json"]
    assert len(warm["logprobs"]) == len(prompts["records"]) and all(v < 0 for v in warm["logprobs"].values())
    assert set(warm["change"].values()) == {0.0} and found["retention--base.json"]["change"] is None
    assert all(c != 0.0 for c in control["change"].values())
    assert control["config_fingerprint"] == json.loads(tested["continued-sft--seed7--taboo--guesser.json"])["fingerprint"]
    failed = found[f"retention--expert-iteration--seed7--{warm_step}.json"]
    assert failed["failed"] is True and failed["logprobs"] == warm["logprobs"]
    learner = load_model_by_name("tiny-random", role="learner")  # measured again, apart: the same numbers
    rows = turn_rows(learner.tokenizer, prompts["records"])
    again = adapters_logprobs(learner.model, rows, {"warm": out / "work" / warm["adapter"], "base": None})
    assert again["warm"] == pytest.approx(warm["logprobs"], abs=1e-6)
    assert again["base"] == pytest.approx(found["retention--base.json"]["logprobs"], abs=1e-6)
    assert "Retention: the mean log-probability per token of the base model's greedy first-turn replies" in \
        (out / "protocol-report.md").read_text()
    assert "- continued-sft by checkpoint (step: log-prob/token, seeds): 1: " in (out / "protocol-report.md").read_text()
    assert "| expert-iteration (failed: the warm-up's adapter) | 1 | " in (out / "protocol-report.md").read_text()
    stamps = {p.name: p.stat().st_mtime_ns for p in out.glob("retention*.json")}
    assert protocol.main(run) == 0  # cached: neither the prompts nor any adapter again
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("retention*.json")} == stamps


def test_the_forgetting_table_from_the_files_alone(bench, tmp_path):
    """Before -> after against the base model and, per seed, against the warm-up; mean ± sd over seeds."""
    report = bench["protocol_report"]
    common = {"set": "out_of_domain", "games": ["debate"], "instances_per_experiment": 1, "num_episodes": 3,
              "static_tasks": ["playpen_word_clues"], "num_questions": 50}
    rows = [("base", None, 10.0, 0.5), ("sft", 1, 12.0, 0.45), ("sft", 2, 14.0, 0.47),
            ("spin", 1, 8.0, 0.40), ("spin", 2, 10.0, 0.40)]
    for method, seed, clem, stat in rows:
        (tmp_path / report.forgetting_file(method, seed)).write_text(json.dumps(
            {**common, "method": method, "seed": seed, "clemscore": clem, "statscore": stat}))
    assert report.load_results(tmp_path) == {}  # not test results
    lines = report.forgetting_lines(tmp_path)
    assert "| base model | — | 10.0 | — | 0.500 | — |" in lines
    assert "| sft (warm-up) | 2 | 10.0 -> 13.0 ± 1.4 | — | 0.500 -> 0.460 ± 0.014 | — |" in lines
    # spin: -4 on both seeds against the warm-up; -0.05 and -0.07 on the statscore
    assert ("| spin | 2 | 10.0 -> 9.0 ± 1.4 | 13.0 -> 9.0 (-4.0 ± 0.0) | 0.500 -> 0.400 ± 0.000 | "
            "0.460 -> 0.400 (-0.060 ± 0.014) |") in lines
    assert "50 questions" in lines[1] and "debate; 1 instance(s) per experiment: 3 episodes" in lines[1]


# ----------------------------------------------------------------------------- the forced-choice diagnostic

def follower_episode(folder: Path, target: int, follower: str = "Player 2") -> None:
    """An episode folder in clemcore's layout: interactions.json with the giver's turn, the
    game master's prompt to the follower and the follower's reply."""
    folder.mkdir(parents=True)
    giver = "Player 1" if follower == "Player 2" else "Player 2"
    send = lambda to, text: {"from": "GM", "to": to, "action": {"type": "send message", "content": text}}  # noqa: E731
    (folder / "interactions.json").write_text(json.dumps({
        "players": {"GM": {"game_role": "Game Master"}, giver: {"game_role": "Instruction Giver"},
                    follower: {"game_role": "Instruction Follower"}},
        "target_position": target,
        "turns": [[send(giver, "describe the target"),
                   {"from": giver, "to": "GM", "action": {"type": "get message", "content": "Expression: x"}},
                   send(follower, f"grids of {folder.name}"),
                   {"from": follower, "to": "GM", "action": {"type": "get message", "content": "Answer: first"}},
                   send(follower, "after the reply: not part of the prompt")]]}))


def test_the_follower_prompts_come_from_the_episodes(bench, tmp_path):
    choice = importlib.import_module("protocol_choice")
    game = tmp_path / "referencegame"
    follower_episode(game / "letter_grids" / "instance_00003", target=2)
    follower_episode(game / "letter_grids" / "instance_00004", target=3, follower="Player 1")  # roles by name
    follower_episode(game / "number_grids" / "instance_00003", target=1)  # not a wanted item
    found = choice.follower_prompts(game, ["letter_grids/3", "letter_grids/4", "letter_grids/5"])
    assert found == {
        "letter_grids/3": {"messages": [{"role": "user", "content": "grids of instance_00003"}], "target": 2},
        "letter_grids/4": {"messages": [{"role": "user", "content": "grids of instance_00004"}], "target": 3}}


def test_the_forced_choice_is_the_full_forward_of_each_answer(bench, tiny_pair):
    """The log-probabilities from the shared prompt's cache equal those of one forward over
    prompt + answer; the choice and the target's probability, hand-computed."""
    import math

    import torch
    choice = importlib.import_module("protocol_choice")
    from playpen.rollouts.chat import prompt_ids
    from playpen.training.preference.rounds import turn_ids
    model, tokenizer = tiny_pair
    messages = [{"role": "user", "content": "Which grid? Reply with Answer: first, second or third."}]
    found = choice.answer_logprobs(model, tokenizer, messages)
    prompt = prompt_ids(tokenizer, messages)
    for position, value in zip(choice.POSITIONS, found):
        answer = turn_ids(tokenizer, messages, f"Answer: {position}")
        assert answer[-1] == tokenizer.eos_token_id and len(answer) > 2
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([prompt + answer])).logits[0].float()
        expected = sum(float(torch.log_softmax(logits[len(prompt) - 1 + k], -1)[token])
                       for k, token in enumerate(answer))
        assert value == pytest.approx(expected, abs=1e-4)
    assert len(set(found)) == 3  # three different answers, three different numbers
    picked = choice.choose([-1.0, -2.0, -3.0], target=2)
    assert picked["choice"] == 1 and picked["correct"] == 0
    assert picked["p_target"] == pytest.approx(math.exp(-2) / (math.exp(-1) + math.exp(-2) + math.exp(-3)))
    assert choice.choose([-5.0, -4.0, -0.5], target=3)["correct"] == 1


def test_the_forced_choice_table_from_the_files_alone(bench, tmp_path):
    """Accuracy, P(target), the positions chosen, targets right at every position and the
    paired comparison with the control, hand-computed from the choice files."""
    report = bench["protocol_report"]
    items = ["letter_grids/0", "letter_grids/1", "letter_grids/2", "letter_grids/3"]  # targets D, D, D, O
    splits = {"games": {"referencegame": {"clusters": {"letter_grids/0": "D", "letter_grids/1": "D",
                                                       "letter_grids/2": "D", "letter_grids/3": "O"}}}}
    files = {("base", None): ([0.3, 0.3, 0.3, 0.3], [0, 0, 1, 0], [1, 1, 1, 1]),
             ("continued-sft", 1): ([0.4, 0.5, 0.2, 0.3], [1, 1, 0, 0], [1, 2, 1, 1]),
             ("spin", 1): ([0.6, 0.7, 0.5, 0.3], [1, 1, 1, 0], [1, 2, 3, 1])}
    for (method, seed), (p, correct, chosen) in files.items():
        (tmp_path / report.choice_file(method, seed)).write_text(json.dumps({
            "method": method, "seed": seed, "scores": dict(zip(items, p)), "correct": dict(zip(items, correct)),
            "choice": dict(zip(items, chosen))}))
    assert report.load_results(tmp_path) == {}  # not test results
    lines = report.choice_lines(tmp_path, splits)
    assert "| base model | — | 4 | 25.0 | 30.0 | 100 / 0 / 0 | 0 of 2 | — |" in lines
    assert "| continued-sft | 1 | 4 | 50.0 | 35.0 | 75 / 25 / 0 | 0 of 2 | — |" in lines
    # spin - control per item: +0.2, +0.2, +0.3, 0.0: 3 better, 0 worse; exact sign-flip p over
    # the 3 non-zero differences: 2 of 2^3 sign patterns as extreme = 0.25
    assert "| spin | 1 | 4 | 75.0 | 52.5 | 50 / 25 / 25 | 1 of 2 | 3/0, 0.2500 |" in lines


def test_the_warm_up_lines_flag_a_warm_up_stopped_while_improving(bench):
    report = bench["protocol_report"]
    stopped = {"steps": 16, "warm_up_curve": [{"step": 8, "dev": 10.0}, {"step": 16, "dev": 20.0},
                                              {"step": 24, "dev": 15.0}, {"step": 32, "dev": 18.0}]}
    capped = {"steps": 16, "warm_up_curve": [{"step": 8, "dev": 10.0}, {"step": 16, "dev": 12.5}]}
    lines = report.warm_up_lines({("sft", "taboo/guesser"): {1: stopped, 2: capped},
                                  ("continued-sft", "taboo/guesser"): {1: {"steps": 16}}})
    assert lines[2] == "- seed 1: tested at 16 steps (8: 10.0, 16: 20.0, 24: 15.0, 32: 18.0)"
    assert lines[3].startswith("- seed 2: tested at 16 steps (8: 10.0, 16: 12.5) — the best chunk is the last one")
    assert len(lines) == 4 and report.warm_up_lines({}) == []


def test_the_warm_up_keeps_every_chunk_checkpoint_through_interruptions(bench, tmp_path):
    """A resumed warm-up needs each logged chunk's checkpoint; interruptions save extra ones.
    With the old limit (one per chunk + 1), the third interruption rotated checkpoint-8 away."""
    from playpen.training.common.checkpoints import checkpoints, rotate_checkpoints, write_state
    args = SimpleNamespace(warmup_chunk=8, warmup_max_chunks=8)
    saving = bench["protocol"].warm_up_saving(args)
    assert saving["save_steps"] == 8
    chunks = [8 * c for c in range(1, 9)]
    for step in sorted(chunks + [12, 20, 45, 52]):  # four SIGTERM checkpoints between chunks
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        write_state(folder, {"global_step": step})
        rotate_checkpoints(tmp_path, saving["save_total_limit"])
    kept = [p.name for p in checkpoints(tmp_path)]
    assert all(f"checkpoint-{step}" in kept for step in chunks), kept
