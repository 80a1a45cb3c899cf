"""Self-rewarding: the judge's score regex (fuzzed), best vs worst, and the trainer through
`playpen run` on tiny models — judged by a remote judge on a real local HTTP server or by
the learner itself, or ranked by the game — with the adapter changing, replies without a
score counted, logged and skipped, judge calls absent from the pairs, and the user errors
(one line, exit 2, nothing loaded or overwritten)."""
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from openai_server import ScriptedServer
from rollout_helpers import JUDGE_TEMPLATE, SPEAKER, teach_speaker_and_judge

from playpen.cli import cli
from playpen.pairs import read_pairs
from playpen.training.rubrics.judging import SCORE_REGEX_FILE, load_regex, parse_score

REPO_ROOT = Path(__file__).resolve().parents[1]
TRAINER = "self-rewarding"
TOYGAMES = REPO_ROOT / "tests" / "toygames"
MOVE = re.compile(r"--- the move to grade ---\n(.*)\n--- end of the move ---", re.S)


@pytest.fixture(scope="session")
def sr_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny random model taught to play relay's Speaker and judge through JUDGE_TEMPLATE
    (rollout_helpers.teach_speaker_and_judge)."""
    return teach_speaker_and_judge(tiny_model_dir, tmp_path_factory.mktemp("tiny-sr"))


@pytest.fixture
def sr_workspace(tiny_workspace, sr_model_dir):
    """tiny_workspace + `tiny-sr` + the toy relay game whose training instances all say 'apple'
    + JUDGE_TEMPLATE in judge.jinja."""
    import shutil
    games = tiny_workspace / "toygames"
    shutil.copytree(TOYGAMES / "relay", games / "relay")
    (games / "relay" / "in" / "instances_train.json").write_text(json.dumps({"experiments": [
        {"name": "short", "max_rounds": 2, "game_instances": [{"game_id": i, "word": "apple"} for i in range(4)]}]}))
    entries = json.loads((tiny_workspace / "model_registry.json").read_text())
    entries.append({**entries[0], "model_name": "tiny-sr", "huggingface_id": str(sr_model_dir)})
    (tiny_workspace / "model_registry.json").write_text(json.dumps(entries))
    (tiny_workspace / "game_registry.json").write_text(json.dumps([{"benchmark_path": str(games)}]))
    (tiny_workspace / "judge.jinja").write_text(JUDGE_TEMPLATE)
    return tiny_workspace


def register_judge(workspace, base_url):
    path = workspace / "model_registry.json"
    registry = json.loads(path.read_text())
    registry.append({"model_name": "remote-judge", "backend": "openai_compatible", "model_id": "judge"})
    path.write_text(json.dumps(registry))
    (workspace / "key.json").write_text(json.dumps({"openai_compatible": {"api_key": "test", "base_url": base_url}}))


def lora_b(checkpoint: Path) -> dict:
    from safetensors.torch import load_file
    return {n: w for n, w in load_file(checkpoint / "adapter_model.safetensors").items() if "lora_B" in n}


def log_of(run_dir: Path, event: str) -> list[dict]:
    return [r for r in map(json.loads, (run_dir / "playpen-log.jsonl").read_text().splitlines())
            if r["event"] == event]


def run_trainer(*args, learning_rate="1e-3"):
    return CliRunner().invoke(cli, ["run", str(TRAINER), "-T", "1.0", "-L", "6", "--games", "relay",
                                    "--roles", "Speaker", "--train-instances", "instances_train",
                                    "--batch-size", "2", "--learning-rate", learning_rate, *args])


# ----------------------------------------------------------------------------- the score regex

PATTERN = load_regex("")


@settings(max_examples=300, deadline=None)
@given(score=st.integers(0, 5) | st.floats(0, 5, allow_nan=False).map(lambda x: round(x, 2)),
       before=st.text(max_size=200), style=st.sampled_from(["Score: {}", "score = {}", "**Score:** {}",
                                                             "  Total score: {}", "SCORE:{}/5",
                                                             "The move earns a total of {} points."]))
def test_the_score_regex_reads_any_score_in_range_from_the_end_of_a_reply(score, before, style):
    reply = f"{before}\n{style.format(score)}"
    assert parse_score(reply, PATTERN, 0, 5) == float(score)


@settings(max_examples=300, deadline=None)
@given(reply=st.text(max_size=300))
def test_garbage_gives_no_score_and_nothing_out_of_range(reply):
    value = parse_score(reply, PATTERN, 0, 5)
    assert value is None or 0 <= value <= 5
    if not any(ch.isdigit() for ch in reply):
        assert value is None
    while re.search("score|total", reply, re.I):  # without the keywords, digits alone are no score
        reply = re.sub("score|total", "", reply, flags=re.I)
    assert parse_score(reply, PATTERN, 0, 5) is None


@given(score=st.integers(6, 10**6) | st.integers(-10**6, -1))
def test_a_score_out_of_range_is_no_score(score):
    assert parse_score(f"Score: {score}", PATTERN, 0, 5) is None


def test_the_shipped_regex_file_is_the_default():
    assert load_regex("").pattern == SCORE_REGEX_FILE.read_text().strip()


def test_best_vs_worst_takes_the_extremes_and_skips_ties_and_unscored():
    from playpen.inference.types import Generation
    from playpen.training.preference.self_rewarding import BranchPoint, best_vs_worst

    class Episode:
        game, experiment, game_id, episode_id = "relay", "short", 0, "e0"
    point = BranchPoint(Episode(), "Player 1", "Speaker", 0, ({"role": "user", "content": "go"},), (1, 2))
    cands = [Generation((10 + i, 2), (0.0, 0.0), f"c{i}", True) for i in range(4)]
    pair = best_vs_worst(point, cands, [3.0, None, 5.0, 1.0], {})
    assert (pair.chosen, pair.rejected, pair.chosen_ids, pair.rejected_ids) == ("c2", "c3", (12, 2), (13, 2))
    assert pair.prompt_ids == (1, 2) and pair.meta["scores"] == [3.0, None, 5.0, 1.0]
    assert best_vs_worst(point, cands, [2.0, 2.0, None, 2.0], {}) is None  # all tie
    assert best_vs_worst(point, cands, [None, None, 4.0, None], {}) is None  # one score only


# ----------------------------------------------------------------------------- the trainer

def remote_judge(counter):
    """A judge server policy: apple 5, river 1, anything else 2; every fourth call garbage."""
    def reply(messages):
        counter["calls"] += 1
        if counter["calls"] % 4 == 0:
            counter["garbage"] += 1
            return "I would rather not say."
        move = MOVE.search(messages[-1]["content"]).group(1)
        counter["moves"].append(move)
        score = 5 if "apple" in move else 1 if "river" in move else 2
        return f"The move is fine.\nScore: {score}"
    return reply


def test_self_rewarding_with_a_remote_judge_trains_the_adapter_in_rounds(sr_workspace):
    counter = {"calls": 0, "garbage": 0, "moves": []}
    with ScriptedServer(reply=remote_judge(counter)) as server:
        register_judge(sr_workspace, server.base_url)
        # small steps: round 2's policy still says apple or river
        result = run_trainer("-l", "tiny-sr", "-t", "programmatic", "--judge", "remote-judge",
                             "--candidates", "6", "--pair-instances", "4", "--rounds", "2", "--max-steps", "2",
                             "--no-evaluate", learning_rate="1e-4")
    assert result.exit_code == 0, result.output
    run_dir = sr_workspace / "models" / "self-rewarding+lora" / "tiny-sr" / "judge-remote-judge-programmatic"
    # round 2 started from round 1's adapter (kept as its reference) and changed it
    end_of_round_1 = lora_b(run_dir / "reference-round-2")
    assert any(w.abs().sum() > 0 for w in end_of_round_1.values()), "round 1 changed nothing"
    final = lora_b(run_dir / "checkpoint-2")
    assert any(not final[n].equal(end_of_round_1[n]) for n in final), "round 2 changed nothing"
    for round_ in (1, 2):
        pairs = read_pairs(run_dir / f"pairs-round-{round_}.jsonl")
        assert pairs and all(p.has_ids and p.meta["round"] == round_ for p in pairs)
        for p in pairs:  # best vs worst by the judge's scores
            assert p.meta["chosen"]["score"] == max(s for s in p.meta["scores"] if s is not None)
            assert p.meta["rejected"]["score"] == min(s for s in p.meta["scores"] if s is not None)
            assert p.meta["chosen"]["score"] > p.meta["rejected"]["score"] and p.meta["judge"] == "remote-judge"
            assert [m["content"] for m in p.prompt] == [SPEAKER]
            # the judge's scores follow the moves: apple 5, river 1, anything else 2
            for side, text in (("chosen", p.chosen), ("rejected", p.rejected)):
                assert p.meta[side]["score"] == (5 if "apple" in text else 1 if "river" in text else 2)
            assert p.chosen in counter["moves"] and p.rejected in counter["moves"]
    # every reply without a score was counted, logged and skipped
    assert counter["garbage"] >= 1
    unparsed = log_of(run_dir, "judge_unparsed")
    assert len(unparsed) == counter["garbage"]
    assert all(u["reply"] == "I would rather not say." and u["role"] == "Speaker" for u in unparsed)
    steps = log_of(run_dir, "train_step")
    assert [s["step"] for s in steps] == [1, 2]
    assert steps[-1]["judge/unparsed_total"] == counter["garbage"]
    assert sum(s["judge/replies"] for s in steps) == counter["calls"]
    assert "memory/peak_rss_mb" in steps[0] and [s["pairs/round"] for s in steps] == [1, 2]
    assert "replies without a score, skipped" in result.output


@pytest.mark.parametrize("judge, name", [("learner", "tiny-sr (learner)"),  # the policy itself
                                         ("tiny-sr", "tiny-sr")])  # a registered local model: a frozen copy
def test_the_learner_judges_itself_and_judge_calls_never_become_training_data(sr_workspace, sr_model_dir,
                                                                              judge, name):
    result = run_trainer("-l", "tiny-sr", "-t", "programmatic", "--judge", judge, "--judge-template", "judge.jinja",
                         "--candidates", "6", "--pair-instances", "2", "--rounds", "1", "--max-steps", "1",
                         "--judge-max-tokens", "8", "--no-evaluate")
    assert result.exit_code == 0, result.output
    run_dir = sr_workspace / "models" / "self-rewarding+lora" / "tiny-sr" / f"judge-{judge}-programmatic"
    assert any(w.abs().sum() > 0 for w in lora_b(run_dir / "checkpoint-1").values()), "adapter unchanged"
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(sr_model_dir)
    pairs = read_pairs(run_dir / "pairs-round-1.jsonl")
    assert pairs
    for p in pairs:
        texts = [m["content"] for m in p.prompt] + [p.chosen, p.rejected]
        assert not any("JUDGE-PROMPT-MARKER" in t or "Score:" in t for t in texts)
        assert "JUDGE-PROMPT-MARKER" not in tokenizer.decode(p.prompt_ids + p.chosen_ids + p.rejected_ids)
        assert tokenizer.decode(p.chosen_ids).startswith(p.chosen)  # the learner's own candidate ids
        assert p.meta["judge"] == name
        # the learner judged as it was taught: "WORD: river" 1, "WORD: apple" 5
        assert p.chosen != "WORD: river" and p.meta["chosen"]["score"] > p.meta["rejected"]["score"]
        assert p.rejected != "WORD: apple"
    # nor do they enter the episode records
    records = list((sr_workspace / "playpen-records").rglob("interactions.json"))
    assert records and not any("JUDGE-PROMPT-MARKER" in r.read_text() for r in records)


def test_the_game_reward_variant_ranks_by_outcome(sr_workspace):
    result = run_trainer("-l", "tiny-sr", "-t", "programmatic", "--reward", "game", "--candidates", "6",
                         "--pair-instances", "2", "--rounds", "1", "--max-steps", "1", "--no-evaluate")
    assert result.exit_code == 0, result.output
    run_dir = sr_workspace / "models" / "self-rewarding+lora" / "tiny-sr" / "game-programmatic"
    assert any(w.abs().sum() > 0 for w in lora_b(run_dir / "checkpoint-1").values())
    pairs = read_pairs(run_dir / "pairs-round-1.jsonl")
    assert pairs and len({p.meta["fork"] for p in pairs}) == len(pairs)  # one pair per branch point
    assert all(p.meta["chosen"]["reward"] > p.meta["rejected"]["reward"] and p.meta["reward"] == "game"
               for p in pairs)


# ----------------------------------------------------------------------------- bad input

def test_a_judge_that_returns_only_garbage_stops_with_one_line_and_overwrites_nothing(sr_workspace):
    run_dir = sr_workspace / "models" / "self-rewarding+lora" / "tiny-sr" / "judge-remote-judge-programmatic"
    earlier = run_dir / "checkpoint-4"
    earlier.mkdir(parents=True)
    (earlier / "trainer_state.json").write_text('{"global_step": 4}')
    (earlier / "adapter_model.safetensors").write_bytes(b"earlier weights")
    with ScriptedServer(reply=lambda messages: "What a lovely move!") as server:
        register_judge(sr_workspace, server.base_url)
        result = run_trainer("-l", "tiny-sr", "-t", "programmatic", "--judge", "remote-judge", "--overwrite",
                             "--candidates", "2", "--pair-instances", "1", "--rounds", "1", "--max-steps", "1",
                             "--no-evaluate")
        calls = server.requests
    assert result.exit_code == 2, result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("playpen: error")]
    assert "judge 'remote-judge' gave no score in any of its" in line and "'What a lovely move!'" in line
    assert "nothing was trained" in line and calls >= 1
    assert sorted(p.name for p in run_dir.glob("checkpoint-*")) == ["checkpoint-4"]
    assert (earlier / "adapter_model.safetensors").read_bytes() == b"earlier weights"
    assert not list(run_dir.glob("pairs-round-*"))
    assert len(log_of(run_dir, "judge_unparsed")) == calls and not log_of(run_dir, "train_step")
    assert not (run_dir / ".playpen.lock").exists()


@pytest.mark.parametrize("args, expected", [
    (["--judge", "tiny-sr-judge"], "unknown model 'tiny-sr-judge'. Did you mean: tiny-sr"),
    (["--judge", "programmatic"], "option --judge: 'programmatic' cannot judge"),
    (["--judge-template", "nope.jinja"], "option --judge-template: 'nope.jinja' is neither a shipped prompt"),
    (["--judge-template", "BAD_VARIABLE"], "'verdict' is undefined (a template may use: game, role"),
    (["--judge-template", "NO_CANDIDATE"], "never shows the turn to judge"),
    (["--judge-template", "SYNTAX"], "bad.jinja:1:"),
    (["--score-regex", "BAD_REGEX"], "does not compile"),
    (["--score-regex", "missing.regex"], "option --score-regex: 'missing.regex' is not a file"),
    (["--score-min", "5", "--score-max", "1"], "--score-min 5 must be below --score-max 1"),
    (["--reward", "gmae"], "unknown reward 'gmae'. Did you mean: game?"),
    (["--candidates", "1"], "option --candidates: 1 is not valid"),
    (["--rounds", "3", "--max-steps", "2"], "--max-steps 2 is fewer than --rounds 3"),
])
def test_user_errors_one_line_before_any_model_loads(sr_workspace, monkeypatch, args, expected):
    files = {"BAD_VARIABLE": ("bad.jinja", "{{ candidate }} {{ verdict }}"),
             "NO_CANDIDATE": ("bad.jinja", "rate the move of {{ role }}"),
             "SYNTAX": ("bad.jinja", "{{ candidate }"), "BAD_REGEX": ("bad.regex", "Score: (\\d")}
    for i, arg in enumerate(args):
        if arg in files:
            name, text = files[arg]
            (sr_workspace / name).write_text(text)
            args[i] = name
    import playpen.models
    monkeypatch.setattr(playpen.models, "load_model_by_name",
                        lambda *a, **k: pytest.fail("a model was loaded before the options were checked"))
    result = CliRunner().invoke(cli, ["run", str(TRAINER), "-l", "tiny-sr", "--games", "relay", *args])
    assert result.exit_code == 2, result.output
    assert expected in result.output and result.output.count("\n") == 1, result.output
    assert not (sr_workspace / "models").exists() and not (sr_workspace / "playpen-records").exists()


def test_a_remote_judge_whose_server_is_down_stops_with_one_line_before_playing(sr_workspace):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    register_judge(sr_workspace, url)
    result = run_trainer("-l", "tiny-sr", "-t", "programmatic", "--judge", "remote-judge", "--rounds", "1",
                         "--max-steps", "1", "--no-evaluate")
    assert result.exit_code == 2, result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("playpen: error")]
    assert "remote-judge" in line and url in line
    assert not (sr_workspace / "playpen-records").exists()
    assert not list((sr_workspace / "models").rglob("checkpoint-*"))
    assert not list((sr_workspace / "models").rglob(".playpen.lock"))  # the run folder is free again


def test_the_learner_judges_with_or_without_its_adapter(sr_model_dir):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from playpen.training.rubrics.judging import Judge, JudgeRequest, JudgeSpec
    tokenizer = AutoTokenizer.from_pretrained(sr_model_dir)
    base = AutoModelForCausalLM.from_pretrained(sr_model_dir)
    from jinja2 import Template
    spec = JudgeSpec(Template(JUDGE_TEMPLATE), PATTERN, 0, 5)
    requests = [JudgeRequest(({"role": "user", "content": SPEAKER},), f"WORD: {w}", "relay", "Speaker")
                for w in ("apple", "river")]
    judge = Judge(spec, "tiny-sr (learner)", tokenizer=tokenizer, max_tokens=6)
    plain = [v.reply for v in judge.verdicts(requests, policy=base)]
    assert [v.score for v in judge.verdicts(requests, policy=base)] == [5.0, 1.0]  # what it was taught
    torch.manual_seed(0)
    policy = get_peft_model(base, LoraConfig(r=8, target_modules="all-linear", init_lora_weights=False,
                                             lora_alpha=64))
    with_adapter = [v.reply for v in judge.verdicts(requests, policy=policy)]
    without = Judge(spec, "tiny-sr (learner, no adapter)", tokenizer=tokenizer, max_tokens=6, with_adapter=False)
    assert [v.reply for v in without.verdicts(requests, policy=policy)] == plain
    assert with_adapter != plain  # a random adapter judges otherwise
