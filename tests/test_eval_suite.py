"""`playpen eval` as LM Playschool reports: a clemscore per game set (in-domain,
out-of-domain), the static suite's statscore (lm-evaluation-harness, playpen's offline
task), and the before -> after comparison; user mistakes one line, exit 2."""
import json
import math
import sys

import pytest
from click.testing import CliRunner

from playpen.cli import cli
from playpen.evaluation import table_from_scores
from playpen.evaluation.compare import compare_runs
from playpen.evaluation.game_sets import DEFAULT_SETS_FILE, load_game_sets, set_scores
from playpen.evaluation.word_clues import QUESTIONS_FILE, make_questions


def invoke(*args):
    return CliRunner().invoke(cli, list(args))


def one_line_error(result, expected: str):
    assert result.exit_code == 2, result.output
    assert result.output.startswith("playpen: error:") and result.output.count("\n") == 1, result.output
    assert expected in result.output, result.output


# ----------------------------------------------------------------------------- game sets

def test_set_clemscore_is_clem_evals_macro_average_by_hand():
    """Set x: game a (2 episodes, 1 aborted, the other 80) and game b (2 played: 40, 60);
    set y: game c (1 episode, aborted: no quality).
    a: 50% played, quality 80; b: 100% played, quality 50; c: 0% played, quality n/a.
    x: % played (50+100)/2 = 75, quality (80+50)/2 = 65, clemscore 0.75 × 65 = 48.75
    (the mean of the games' clemscores, (40+50)/2 = 45, is NOT clem eval's number);
    y: 0% played, no quality, clemscore 0. Both sets: % played 50, quality 65, 32.5."""
    episodes = [{"game": "a", "Aborted": 1, "Main Score": math.nan}, {"game": "a", "Aborted": 0, "Main Score": 80},
                {"game": "b", "Aborted": 0, "Main Score": 40}, {"game": "b", "Aborted": 0, "Main Score": 60},
                {"game": "c", "Aborted": 1, "Main Score": math.nan}]
    table = table_from_scores("m", episodes)
    scores = set_scores(table, {"x": ["a", "b"], "y": ["c"], "both": ["a", "b", "c"], "part": ["b", "z"]})
    x, y, both, part = scores["x"], scores["y"], scores["both"], scores["part"]
    assert (x.percent_played, x.quality, x.clemscore, x.num_episodes) == (75.0, 65.0, 48.75, 4)
    assert y.percent_played == 0.0 and math.isnan(y.quality) and y.clemscore == 0.0
    assert (both.percent_played, both.quality, both.clemscore) == (50.0, 65.0, 32.5)
    assert both.clemscore == table.clemscore  # the set of every game is the table's own overall
    assert part.missing == ("z",) and part.clemscore == 50.0  # b alone; z not played is said, not counted


def test_default_sets_cover_playpens_games_once(tmp_path):
    from playpen.registry import game_entries
    sets = load_game_sets(cwd=tmp_path)
    assert sets.path == DEFAULT_SETS_FILE and list(sets.sets) == ["in_domain", "out_of_domain"]
    resolved = sets.resolve(cwd=tmp_path)
    games = resolved["in_domain"] + resolved["out_of_domain"]
    assert len(games) == len(set(games))
    assert sorted(games) == sorted(e.name for e in game_entries(tmp_path, scan_cwd=False))
    assert sets.static_tasks == ("playpen_word_clues",)


def test_a_sets_file_in_the_cwd_replaces_the_default_and_takes_clemcore_selectors(tmp_path):
    (tmp_path / "game_sets.json").write_text(json.dumps(
        {"sets": {"wordles": [{"main_game": "wordle"}], "clembench": [{"benchmark": ["2.0"]}, "taboo"]}}))
    sets = load_game_sets(cwd=tmp_path)
    assert sets.path == tmp_path / "game_sets.json"
    resolved = sets.resolve(cwd=tmp_path)
    assert resolved["wordles"] == ["wordle", "wordle_withclue", "wordle_withcritic"]
    assert "referencegame" in resolved["clembench"] and "debate" not in resolved["clembench"]
    assert resolved["clembench"].count("taboo") == 1
    assert sets.resolve(["wordles"], cwd=tmp_path) == {"wordles": resolved["wordles"]}


@pytest.mark.parametrize("content, expected", [
    ("{not json", "game_sets.json:1:2: malformed JSON"),
    ("[]", "must be a JSON object"),
    ('{"sets": {"a": ["taboo"]}, "set": 1}', "unknown key 'set' (valid keys: description, sets, static_tasks)"),
    ('{"sets": {}}', '"sets" must be a non-empty object'),
    ('{"sets": {"a": []}}', "set 'a' must be a non-empty list"),
    ('{"sets": {"a": [3]}}', "set 'a': entry 3 is neither a game name nor a selector object"),
    ('{"sets": {"a": ["no_such_game"]}}', "set 'a': unknown game 'no_such_game'"),
    ('{"sets": {"a": [{"main_game": "no_such"}]}}',
     'no registered game matches the selector {"main_game": "no_such"}'),
    ('{"sets": {"a": ["taboo"]}, "static_tasks": []}', '"static_tasks" must be a non-empty list'),
])
def test_a_bad_sets_file_is_one_line_and_exit_2(clem_workspace, monkeypatch, content, expected):
    monkeypatch.chdir(clem_workspace)
    (clem_workspace / "game_sets.json").write_text(content)
    one_line_error(invoke("eval", "-m", "programmatic"), expected)
    assert not (clem_workspace / "results").exists()


def test_unknown_set_name_or_missing_sets_file(clem_workspace, monkeypatch):
    monkeypatch.chdir(clem_workspace)
    one_line_error(invoke("eval", "-m", "programmatic", "--set", "in_domian"),
                   "unknown game set 'in_domian' in ")
    assert "the sets are in_domain, out_of_domain" in invoke("eval", "-m", "programmatic", "-s", "x").output
    one_line_error(invoke("eval", "-m", "programmatic", "--sets-file", "nope.json"),
                   "game sets file nope.json does not exist")
    assert not (clem_workspace / "results").exists()


def test_eval_reports_each_sets_clemscore(clem_workspace, monkeypatch):
    monkeypatch.chdir(clem_workspace)
    (clem_workspace / "sets.json").write_text(json.dumps(
        {"sets": {"refs": ["referencegame"], "wordles": [{"main_game": "wordle"}]}}))
    result = invoke("eval", "-m", "programmatic", "--sets-file", "sets.json", "-s", "refs,wordles", "-n", "1",
                    "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    rows = {g["game"]: g for g in out["games"]}
    assert sorted(rows) == ["referencegame", "wordle", "wordle_withclue", "wordle_withcritic"]
    assert out["sets"]["refs"]["clemscore"] == rows["referencegame"]["clemscore"]
    wordles = [rows[g] for g in ("wordle", "wordle_withclue", "wordle_withcritic")]
    played = round(sum(r["percent_played"] for r in wordles) / 3, 2)
    quality = round(sum(r["quality"] for r in wordles) / 3, 2)
    assert out["sets"]["wordles"]["clemscore"] == round(played / 100 * quality, 2)
    saved = json.loads((clem_workspace / "results" / "programmatic" / "playpen-eval.json").read_text())
    assert saved["sets"] == out["sets"]
    text = invoke("eval", "-m", "programmatic", "--sets-file", "sets.json", "-s", "refs", "-n", "1",
                  "--name", "again")
    assert text.exit_code == 0, text.output
    assert "clemscore per game set" in text.output and "\nrefs " in text.output


# ----------------------------------------------------------------------------- static suite

def test_the_shipped_questions_are_what_the_generator_makes():
    shipped = [json.loads(line) for line in QUESTIONS_FILE.read_text(encoding="utf-8").splitlines()]
    assert shipped == make_questions()
    assert len(shipped) == 240 and all(q["choices"][q["answer"]] == q["word"] for q in shipped)
    assert all(len(set(q["choices"])) == 4 for q in shipped)
    # the answer is not always in one place (a model picking "the first" would score 1.0)
    assert len({q["answer"] for q in shipped}) == 4


def test_static_suite_with_the_tiny_model(tiny_workspace):
    result = invoke("eval", "-m", "tiny-random", "--suite", "static", "--limit", "24", "--json")
    assert result.exit_code == 0, result.output
    static = json.loads(result.stdout)["static"]
    assert 0.0 <= static["statscore"] <= 1.0
    assert [t["task"] for t in static["tasks"]] == ["playpen_word_clues"]
    task = static["tasks"][0]
    assert task["metric"] == "acc" and task["num_samples"] == 24 and task["value"] == static["statscore"]
    saved = json.loads((tiny_workspace / "results" / "tiny-random" / "playpen-static.json").read_text())
    assert saved["statscore"] == static["statscore"]
    assert saved["lm_eval"]["results"]["playpen_word_clues"]["acc,none"] == pytest.approx(task["value"], abs=1e-4)
    # an earlier static evaluation is never replaced silently
    one_line_error(invoke("eval", "-m", "tiny-random", "--suite", "static", "--limit", "4"),
                   "holds an earlier static evaluation")


def test_run_static_gives_the_trainer_its_model_back(tiny_model_dir, tmp_path, monkeypatch):
    """lm-eval seeds the RNGs and sets eval mode; a trainer's model and RNG stay as they were.
    Its survey of the machine (torch's collect_env: pip, compilers; about a second) is not run."""
    import torch
    import torch.utils.collect_env
    import lm_eval.evaluator
    surveys = []
    monkeypatch.setattr(torch.utils.collect_env, "get_pretty_env_info", lambda: surveys.append(1) or "")
    survey = lm_eval.evaluator.add_env_info
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from playpen.evaluation.static_suite import run_static
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model.train()
    torch.manual_seed(123)
    state = torch.get_rng_state()
    table = run_static(model, tokenizer, ["playpen_word_clues"], run_name="tiny", limit=8)
    assert model.training and torch.equal(torch.get_rng_state(), state)
    assert surveys == [] and lm_eval.evaluator.add_env_info is survey  # skipped for the call only
    assert table.tasks[0].num_samples == 8 and 0.0 <= table.statscore <= 1.0
    # a group of a task folder is reported by its aggregate metric, under its own name
    (tmp_path / "group.yaml").write_text("group: words_group\ntask:\n  - playpen_word_clues\n"
                                         "aggregate_metric_list:\n  - metric: acc\n")
    grouped = run_static(model, tokenizer, ["words_group"], run_name="tiny", include_paths=[tmp_path], limit=8)
    assert [(t.task, t.metric) for t in grouped.tasks] == [("words_group", "acc")]
    assert grouped.statscore == table.statscore  # the same 8 questions


def test_static_suite_without_lm_eval_is_one_line(tiny_workspace, monkeypatch):
    monkeypatch.setitem(sys.modules, "lm_eval", None)  # `import lm_eval` now fails as if not installed
    one_line_error(invoke("eval", "-m", "tiny-random", "--suite", "static"),
                   "the static suite needs lm-evaluation-harness, which is not installed")
    assert "pip install 'playpen[static]'" in invoke("eval", "-m", "tiny-random", "--suite", "all").output
    assert not (tiny_workspace / "results").exists()


def test_unknown_or_broken_static_task_is_one_line(tiny_workspace):
    one_line_error(invoke("eval", "-m", "tiny-random", "--suite", "static", "--task", "no_such_task_xyz"),
                   "static task 'no_such_task_xyz' cannot be loaded")
    one_line_error(invoke("eval", "-m", "tiny-random", "--suite", "static", "--task", "missing.yaml"),
                   "static task file 'missing.yaml' does not exist")
    (tiny_workspace / "broken.yaml").write_text("task: broken\ncustom_dataset: !function nowhere.load\n"
                                                 "output_type: multiple_choice\ntest_split: test\n")
    one_line_error(invoke("eval", "-m", "tiny-random", "--suite", "static", "--task", "broken.yaml"),
                   "static task 'broken.yaml' cannot be loaded")
    one_line_error(invoke("eval", "-m", "tiny-random", "--suite", "static", "--include-path", "no/dir"),
                   "--include-path 'no/dir' is not a folder")
    (tiny_workspace / "mine").mkdir()
    (tiny_workspace / "mine" / "group.yaml").write_text(
        "group: words_again\ntask:\n  - playpen_word_clues\naggregate_metric_list:\n  - metric: acc\n")
    one_line_error(invoke("eval", "-m", "tiny-random", "--suite", "static", "--include-path", "mine",
                          "--task", "words_again,playpen_word_clues"),
                   "Duplicate task 'playpen_word_clues'")
    assert not (tiny_workspace / "results").exists()


def test_static_suite_needs_a_local_hf_model(clem_workspace, monkeypatch):
    monkeypatch.chdir(clem_workspace)
    one_line_error(invoke("eval", "-m", "programmatic", "--suite", "static", "-g", "taboo"), "they need --suite clem")
    one_line_error(invoke("eval", "-m", "programmatic", "--limit", "3"), "add --suite static or all")
    one_line_error(invoke("eval", "-m", "programmatic", "--suite", "static"),
                   "the static suite needs a huggingface_local model")


# ----------------------------------------------------------------------------- before -> after

def _results(folder, sets: dict, overall: float, statscore: float | None):
    folder.mkdir(parents=True)
    (folder / "playpen-eval.json").write_text(json.dumps(
        {"clemscore": overall, "sets": {n: {"clemscore": v} for n, v in sets.items()}}))
    if statscore is not None:
        (folder / "playpen-static.json").write_text(json.dumps(
            {"statscore": statscore, "tasks": [{"task": "t", "metric": "acc", "value": statscore}]}))
    return folder


def test_compare_shows_what_training_cost(tmp_path):
    before = _results(tmp_path / "base", {"in_domain": 20.0, "out_of_domain": 30.0}, 25.0, 0.5)
    after = _results(tmp_path / "trained", {"in_domain": 35.5, "out_of_domain": 22.0}, 28.75, 0.4)
    comparison = compare_runs(before, after, out=tmp_path)
    assert comparison.row("clemscore in_domain").delta == pytest.approx(15.5)
    assert comparison.row("clemscore out_of_domain").delta == pytest.approx(-8.0)
    assert comparison.row("statscore").delta == pytest.approx(-0.1)
    written = json.loads((tmp_path / "playpen-compare.json").read_text())
    assert [r["name"] for r in written["rows"]][:4] == ["clemscore in_domain", "clemscore out_of_domain",
                                                        "clemscore (all games played)", "statscore"]
    assert "-8.00" in (tmp_path / "playpen-compare.txt").read_text()
    # one side without a static evaluation: n/a, not a made-up change
    only_games = _results(tmp_path / "games-only", {"in_domain": 1.0}, 1.0, None)
    result = invoke("eval", "--compare", str(only_games), str(after))
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if x.startswith("statscore"))
    assert line.split()[1:] == ["n/a", "0.4000", "n/a"]
    # a single JSON file on either side
    single = invoke("eval", "--compare", str(before / "playpen-static.json"), str(after / "playpen-static.json"),
                    "--json")
    assert json.loads(single.stdout)["rows"][0] == {"name": "statscore", "before": 0.5, "after": 0.4,
                                                   "change": -0.1}


def _brute_force_p(differences) -> float:
    """Two-sided sign-flip p by listing every one of the 2^n sign patterns (zeros dropped)."""
    from itertools import product
    nonzero = [abs(d) for d in differences if d]
    observed = abs(sum(differences))
    hits = sum(abs(sum(s * d for s, d in zip(signs, nonzero))) >= observed - 1e-9
               for signs in product((1, -1), repeat=len(nonzero)))
    return hits / 2 ** len(nonzero) if nonzero else 1.0


def _scores_by_item(run_dir) -> dict:
    """(game, experiment/game_id) -> Main Score of a played episode, 0 otherwise, read straight from
    the scores.json files (not through playpen's reader)."""
    out = {}
    for path in run_dir.rglob("scores.json"):
        episode = json.loads(path.read_text())["episode scores"]
        main = episode.get("Main Score")
        played = not episode["Aborted"] and main is not None and not math.isnan(main)
        game, experiment, folder = path.parts[-4:-1]
        out[(game, f"{experiment}/{int(folder.split('_')[-1])}")] = float(main) if played else 0.0
    return out


def test_compare_pairs_the_items_of_two_played_folders(tiny_workspace):
    """Two real evaluations (the programmatic players, the tiny random model on more instances):
    --compare pairs the items both played and its p is the enumeration of every sign pattern."""
    before = invoke("eval", "-m", "programmatic", "-g", "referencegame", "-n", "2", "--name", "before")
    assert before.exit_code == 0, before.output
    after = invoke("eval", "-m", "tiny-random", "-g", "referencegame", "-n", "3", "-L", "4", "--name", "after")
    assert after.exit_code == 0, after.output
    first, second = (_scores_by_item(tiny_workspace / "results" / n) for n in ("before", "after"))
    common = sorted(set(first) & set(second))
    assert len(common) < len(second)  # -n 2 against -n 3: only the shared items are paired
    differences = [second[k] - first[k] for k in common]
    result = invoke("eval", "--compare", "results/before", "results/after", "--json")
    assert result.exit_code == 0, result.output
    (paired,) = json.loads(result.stdout)["paired"]
    assert (paired["game"], paired["items"], paired["before_items"], paired["after_items"]) == (
        "referencegame", len(common), len(first), len(second))
    assert paired["sign_flip_p"] == pytest.approx(_brute_force_p(differences), abs=1e-6)
    assert paired["mean_change"] == pytest.approx(sum(differences) / len(differences), abs=1e-6)
    low, high = paired["interval"]
    assert low <= paired["mean_change"] <= high
    text = invoke("eval", "--compare", "results/before", "results/after")
    line = next(x for x in text.output.splitlines() if x.startswith("referencegame "))
    assert line.endswith(f"{len(common)} paired (before {len(first)}, after {len(second)})"), line
    assert float(line.split()[1]) == pytest.approx(paired["mean_change"], abs=0.006)


def _episode(run_dir, game, experiment, game_id, score, aborted=0):
    folder = run_dir / game / experiment / f"instance_{game_id}"
    folder.mkdir(parents=True)
    (folder / "scores.json").write_text(json.dumps({"episode scores": {"Aborted": aborted, "Main Score": score}}))


def test_compare_p_and_interval_on_changes_of_both_signs(tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    old = {"e1/1": 0, "e1/2": 100, "e1/3": 40, "e2/4": 25, "e2/5": 50, "e2/6": 0, "e2/7": 80}
    new = {"e1/1": 100, "e1/2": 100, "e1/3": 70, "e2/4": 0, "e2/5": 90, "e2/6": 60, "e2/7": 80, "e2/8": 10}
    for folder, scores in ((before, old), (after, new)):
        for item, score in scores.items():
            experiment, game_id = item.split("/")
            _episode(folder, "taboo", experiment, game_id, score, aborted=int(item == "e2/4" and folder == after))
        (folder / "playpen-eval.json").write_text(json.dumps({"clemscore": 1.0}))
    (paired,) = compare_runs(before, after).games
    differences = [new[i] - old[i] for i in sorted(old)]  # e2/4 aborted after: 0 - 25
    assert (paired.items, paired.before_items, paired.after_items) == (7, 7, 8)
    assert paired.mean_change == pytest.approx(sum(differences) / 7)
    assert paired.p_value == pytest.approx(_brute_force_p(differences)) and paired.p_method == "exact"
    assert paired.low < paired.mean_change < paired.high


def test_compare_user_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    one_line_error(invoke("eval", "--compare", str(tmp_path / "empty"), str(tmp_path)),
                   "holds neither playpen-eval.json nor playpen-static.json")
    one_line_error(invoke("eval", "--compare", str(tmp_path / "nope"), str(tmp_path)), "does not exist")
    (tmp_path / "bad.json").write_text("{")
    one_line_error(invoke("eval", "--compare", str(tmp_path / "bad.json"), str(tmp_path)),
                   "not a readable results file")


def test_the_sets_file_shown_in_the_docs_is_valid(tmp_path):
    import re
    from pathlib import Path
    doc = Path(__file__).resolve().parents[1] / "docs" / "evaluation.md"
    block = re.findall(r"```json\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)[0]
    (tmp_path / "game_sets.json").write_text(block)
    resolved = load_game_sets(cwd=tmp_path).resolve(cwd=tmp_path)
    assert "referencegame" in resolved["in_domain"] and "debate" not in resolved["in_domain"]
    assert resolved["wordles"] == ["wordle", "wordle_withclue", "wordle_withcritic"]


def test_suite_all_then_compare_base_and_adapter(toy_workspace, tiny_model_dir):
    """Games and static tasks of one model land in one folder; --compare reads two such folders."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    adapter = toy_workspace / "models" / "sft+lora" / "tiny-random" / "checkpoint-1"
    peft = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir),
                          LoraConfig(r=4, target_modules="all-linear", task_type="CAUSAL_LM"))
    torch.manual_seed(3)
    for name, p in peft.named_parameters():
        if "lora_B" in name:
            p.data.normal_()
    peft.save_pretrained(adapter)
    (toy_workspace / "game_sets.json").write_text(json.dumps({"sets": {"toys": ["sayword"]}}))
    common = ["-n", "1", "-L", "4", "--suite", "all", "--limit", "8", "--json"]
    base = invoke("eval", "-m", "tiny-random", *common)
    assert base.exit_code == 0, base.output
    trained = invoke("eval", "-m", "tiny-random", "--adapter", str(adapter), *common)
    assert trained.exit_code == 0, trained.output
    out = json.loads(trained.stdout)
    assert [g["game"] for g in out["games"]] == ["sayword"] and out["sets"]["toys"]["games"] == ["sayword"]
    assert out["static"]["tasks"][0]["num_samples"] == 8
    folders = sorted(p.name for p in (toy_workspace / "results").iterdir())
    assert folders == ["tiny-random", "tiny-random+sft+lora-checkpoint-1"]
    for folder in folders:
        files = {p.name for p in (toy_workspace / "results" / folder).iterdir()}
        assert {"playpen-eval.json", "playpen-static.json"} <= files
    compared = invoke("eval", "--compare", *(f"results/{f}" for f in folders), "--json")
    assert compared.exit_code == 0, compared.output
    rows = {r["name"]: r for r in json.loads(compared.stdout)["rows"]}
    assert rows["statscore"]["after"] == out["static"]["statscore"]
    assert rows["clemscore toys"]["after"] == out["sets"]["toys"]["clemscore"]
    assert rows["statscore"]["before"] == json.loads(base.stdout)["static"]["statscore"]


@pytest.mark.slow
def test_the_embedded_model_beats_chance_on_the_word_clues(tmp_path, monkeypatch):
    """The shipped task measures something: smol-135m scored 0.767 on all 240 questions (chance 0.25)."""
    monkeypatch.chdir(tmp_path)
    result = invoke("eval", "-m", "smol-135m", "--suite", "static", "--limit", "60", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["static"]["statscore"] > 0.5


def test_compare_says_what_each_number_is_over():
    from playpen.evaluation.compare import Change
    assert Change("clemscore x", 1.0, 2.0, over=(20, 20)).over_text() == "20 episodes"
    assert Change("clemscore x", 1.0, 2.0, over=(20, 90)).over_text() == "20 / 90 episodes"
    assert Change("statscore", 0.5, 0.4, 4, over=(None, 50)).over_text() == "? / 50 questions"
    assert Change("statscore", 0.5, 0.4, 4).over_text() == "" and "over" not in Change("s", 0, 0).to_dict()


# ----------------------------------------------------------------------------- --split dev|test --splits FILE

def _played_items(run_dir) -> set:
    return {f"{p.parent.parent.name}/{int(p.parent.name.split('_')[-1])}" for p in run_dir.rglob("interactions.json")}


def test_eval_plays_only_the_items_of_the_chosen_split(clem_workspace, monkeypatch):
    """A splits file as a user writes it (three dev and two test items of the protocol's
    referencegame entry): --split dev plays exactly the dev items, --split test the test items."""
    from pathlib import Path
    monkeypatch.chdir(clem_workspace)
    protocol = json.loads((Path(__file__).resolve().parents[1] / "benchmarks" / "protocol-splits.json").read_text())
    entry = protocol["games"]["referencegame"]
    mine = {"games": {"referencegame": {"instances": entry["instances"], "dev": entry["dev"][:3],
                                        "test": entry["test"][-2:]}}}
    (clem_workspace / "splits.json").write_text(json.dumps(mine))
    for split in ("dev", "test"):
        result = invoke("eval", "-m", "programmatic", "-g", "referencegame", "--split", split, "--splits",
                        "splits.json", "--name", split, "--json")
        assert result.exit_code == 0, result.output
        assert _played_items(clem_workspace / "results" / split) == set(mine["games"]["referencegame"][split])
        written = json.loads((clem_workspace / "results" / split / "playpen-eval.json").read_text())
        assert written["split"] == split and written["splits_file"] == "splits.json"


@pytest.mark.parametrize("args, expected", [
    (["--split", "dev", "--splits", "nope.json"], "--splits nope.json: no such file"),
    (["--split", "dev", "--splits", "splits.json", "-g", "taboo"], "no split for taboo (the file splits referencegame)"),
    (["--split", "train", "--splits", "splits.json"], "option --split: 'train' is not valid; expected dev or test "
                                                     "(the held-out splits; splits.json defines dev, test)"),
    (["--split", "dev"], "--split and --splits go together"),
    (["--split", "dev", "--splits", "bad.json"], "--splits bad.json: not a splits file"),
    (["--split", "test", "--splits", "devonly.json"], "referencegame has no 'test' split"),
])
def test_split_user_errors_are_one_line(clem_workspace, monkeypatch, args, expected):
    monkeypatch.chdir(clem_workspace)
    (clem_workspace / "splits.json").write_text(json.dumps({"games": {"referencegame": {"dev": ["a/1"], "test": []}}}))
    (clem_workspace / "devonly.json").write_text(json.dumps({"games": {"referencegame": {"dev": ["a/1"]}}}))
    (clem_workspace / "bad.json").write_text("[1, 2")
    games = [] if "-g" in args else ["-g", "referencegame"]
    one_line_error(invoke("eval", "-m", "programmatic", *games, *args), expected)
    assert not (clem_workspace / "results").exists()
