"""wordle, wordle_withclue, wordle_withcritic: rules, parsers, policies, scripted episodes, e2e."""
import json
import math
from collections import Counter
from itertools import cycle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clemcore.backends.model_registry import CustomResponseModel
from clemcore.clemgame import GameBenchmark, GameSpec
from clemcore.clemgame.errors import ParseError

import gametest

GAME_DIR = gametest.BUILTIN_GAMES / "wordle"
VARIANTS = ("wordle", "wordle_withclue", "wordle_withcritic")

# loaded by file path: the folder stays off sys.path (its master.py must not shadow other games')
rules = gametest.load_module(GAME_DIR, "wordle_rules")
solver_mod = gametest.load_module(GAME_DIR, "wordle_solver")
instancegenerator = gametest.load_module(GAME_DIR, "wordle_instancegenerator", "instancegenerator")

G, Y, R = rules.GREEN, rules.YELLOW, rules.RED
words5 = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=5, max_size=5)
few_letters5 = st.text(alphabet="abcde", min_size=5, max_size=5)  # many duplicate letters


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def benchmarks():
    specs = {spec.game_name: spec for spec in GameSpec.from_directory(str(GAME_DIR))}
    loaded = {name: GameBenchmark.load_from_spec(spec) for name, spec in specs.items()}
    yield loaded
    for bench in loaded.values():
        bench.close()


@pytest.fixture(scope="module")
def solver():
    return solver_mod.default_solver()


# --- feedback ---------------------------------------------------------------------------

@pytest.mark.parametrize("guess,target,expected", [
    ("crane", "crane", (G, G, G, G, G)),
    ("sheep", "those", (Y, G, Y, R, R)),   # the example in the prompts
    ("geese", "those", (R, R, R, G, G)),   # greens consume the letter before yellows
    ("speed", "abide", (R, R, Y, R, Y)),   # only one e in the target: second e is red
    ("abbey", "babes", (Y, Y, G, G, R)),
    ("lolly", "hello", (R, Y, G, G, R)),   # both l's of the target are taken by greens
    ("mummy", "maxim", (G, R, Y, R, R)),   # second m yellow once, third m red
    ("eerie", "three", (Y, R, G, R, G)),
    ("aaaaa", "about", (G, R, R, R, R)),
    ("xylyl", "abcde", (R, R, R, R, R)),
])
def test_feedback_known_pairs(guess, target, expected):
    assert rules.feedback(guess, target) == expected


def test_feedback_rejects_length_mismatch():
    with pytest.raises(ValueError):
        rules.feedback("four", "fives")


def test_format_and_parse_feedback_round_trip():
    colors = rules.feedback("sheep", "those")
    line = "guess_feedback: " + rules.format_feedback("sheep", colors)
    assert line == "guess_feedback: s<yellow> h<green> e<yellow> e<red> p<red>"
    assert rules.parse_feedback_lines(line + "\n\nYou have 5 attempts left.") == [("sheep", colors)]
    # a feedback line later in a message (the example in the instructions) is not feedback
    assert rules.parse_feedback_lines("Example:\n" + line) == []


@settings(max_examples=300, deadline=None)
@given(guess=st.one_of(words5, few_letters5), target=st.one_of(words5, few_letters5))
def test_feedback_properties(guess, target):
    colors = rules.feedback(guess, target)
    assert len(colors) == 5 and set(colors) <= {G, Y, R}
    for i in range(5):
        assert (colors[i] == G) == (guess[i] == target[i])
    marked = Counter(letter for letter, c in zip(guess, colors) if c != R)
    for letter in set(guess):
        # green + yellow per letter never exceeds the target's count; exactly min(guess, target)
        assert marked[letter] <= target.count(letter)
        assert marked[letter] == min(guess.count(letter), target.count(letter))
    assert (colors == (G,) * 5) == (guess == target)
    # the number of matched letters is symmetric in guess and target
    assert sum(c != R for c in colors) == sum(c != R for c in rules.feedback(target, guess))


@settings(max_examples=200, deadline=None)
@given(guess=few_letters5, target=few_letters5, perm=st.permutations(range(5)),
       relabel=st.permutations("abcdefghijklmnopqrstuvwxyz"))
def test_feedback_invariants(guess, target, perm, relabel):
    colors = rules.feedback(guess, target)
    # renaming letters consistently changes nothing
    table = str.maketrans("abcdefghijklmnopqrstuvwxyz", "".join(relabel))
    assert rules.feedback(guess.translate(table), target.translate(table)) == colors
    # permuting positions of both words permutes the greens and keeps per-letter counts
    pg = "".join(guess[p] for p in perm)
    pt = "".join(target[p] for p in perm)
    pcolors = rules.feedback(pg, pt)
    assert [pcolors[k] == G for k in range(5)] == [colors[p] == G for p in perm]
    assert Counter(guess[i] for i in range(5) if colors[i] != R) == \
        Counter(pg[i] for i in range(5) if pcolors[i] != R)


@settings(max_examples=50, deadline=None)
@given(guesses=st.lists(st.one_of(words5, few_letters5), min_size=1, max_size=8),
       targets=st.lists(st.one_of(words5, few_letters5), min_size=1, max_size=8))
def test_numpy_patterns_match_reference_feedback(guesses, targets):
    codes = solver_mod.pattern_matrix(solver_mod.to_letters(guesses), solver_mod.to_letters(targets))
    for gi, guess in enumerate(guesses):
        for ti, target in enumerate(targets):
            assert codes[gi, ti] == solver_mod.pattern_code(rules.feedback(guess, target))


# --- parsers ----------------------------------------------------------------------------

@pytest.mark.parametrize("text,guess", [
    ("explanation: frequent letters\nguess: crane", "crane"),
    ("Explanation: Frequent letters\nGUESS: CRANE", "crane"),
    ("  explanation: x  \n\n  guess:   crane   \n\n", "crane"),
    ("explanation: x\r\nguess: crane\r\n", "crane"),
    ("explanation:\nguess: crane", "crane"),
    ("explanation: it mentions guess: slate in passing\nguess: crane", "crane"),
])
def test_parse_guess_accepts(text, guess):
    assert rules.parse_guess_reply(text).guess == guess


@pytest.mark.parametrize("text", [
    "", "   \n \n", "crane", "guess: crane",
    "explanation: x",
    "guess: crane\nexplanation: reversed order",
    "explanation: x\nguess: crane\nguess: slate",
    "explanation: x\nexplanation: y\nguess: crane",
    "explanation: x\nguess: crane\nthanks!",
    "explanation: x\nguess: cranes",
    "explanation: x\nguess: cran",
    "explanation: x\nguess: cr4ne",
    "explanation: x\nguess: cr ne",
    "explanation: x\nguess: crâne",
    "explanation: x\nguess: ｃｒａｎｅ",
    "explanation: x\nguess: \"crane\"",
    "explanation: x\nguess: crane guess: slate",
    "explanation: x\nguess:",
    "explanation: x\nmy guess: crane",
    "x" * 10_000,
    "explanation: " + "a" * 10_000 + "\nguess: " + "b" * 10_000,
    "explanation: \u202e\u0000\ud7ff\nguess: \U0001F600\U0001F600\U0001F600\U0001F600\U0001F600",
    "You are playing Wordle. Answer every message with exactly these two lines:\n"
    "explanation: <one sentence>\nguess: <your five-letter word in lowercase>",
])
def test_parse_guess_rejects(text):
    with pytest.raises(ParseError):
        rules.parse_guess_reply(text)


@pytest.mark.parametrize("value", [None, 42, b"explanation: x\nguess: crane", ["guess: crane"]])
def test_parsers_reject_non_text(value):
    with pytest.raises(ParseError):
        rules.parse_guess_reply(value)
    with pytest.raises(ParseError):
        rules.parse_critic_reply(value)


@pytest.mark.parametrize("text,agrees", [
    ("explanation: fits\nagreement: yes", True),
    ("EXPLANATION: no way\nAgreement: NO  ", False),
    ("\n explanation: fine \n\n agreement:  Yes\n", True),
])
def test_parse_critic_accepts(text, agrees):
    assert rules.parse_critic_reply(text).agrees is agrees


@pytest.mark.parametrize("text", [
    "", "agreement: yes", "explanation: x\nagreement: maybe", "explanation: x\nagreement: yes.",
    "explanation: x\nagreement: yes no", "explanation: x\nguess: crane",
    "explanation: x\nagreement: yes\nagreement: no", "agreement: yes\nexplanation: x",
    "explanation: x\nagreement:", "y" * 10_000,
])
def test_parse_critic_rejects(text):
    with pytest.raises(ParseError):
        rules.parse_critic_reply(text)


reply_like = st.builds(
    lambda pre, key1, mid, key2, word, post: f"{pre}{key1}{mid}\n{key2}{word}{post}",
    st.text(max_size=20), st.sampled_from(["explanation:", "EXPLANATION:", "explanation", "", "guess:"]),
    st.text(max_size=40), st.sampled_from(["guess:", "Guess: ", "agreement:", "guess", "", "explanation:"]),
    st.one_of(words5, st.text(max_size=12), st.sampled_from(["yes", "no", "YES"])),
    st.text(max_size=20))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(st.text(), reply_like))
def test_parsers_raise_only_parse_errors(text):
    for parse in (rules.parse_guess_reply, rules.parse_critic_reply):
        try:
            result = parse(text)
        except ParseError:
            continue
        if parse is rules.parse_guess_reply:
            assert len(result.guess) == 5 and result.guess.isascii() and result.guess.isalpha()
            assert result.guess == result.guess.lower()
        else:
            assert result.agrees in (True, False)


@settings(max_examples=200, deadline=None)
@given(explanation=st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")),
                           max_size=80),
       word=words5, upper=st.booleans(), pad=st.sampled_from(["", " ", "\t", "  \n"]))
def test_well_formed_guess_round_trips(explanation, word, upper, pad):
    text = f"{pad}explanation: {explanation}{pad}\nguess: {word.upper() if upper else word}{pad}"
    assert rules.parse_guess_reply(text) == rules.GuessReply(explanation.strip(), word)


# --- scores -----------------------------------------------------------------------------

@pytest.mark.parametrize("variant,guesses,expected", [
    ("wordle", 1, 100), ("wordle", 3, 100), ("wordle", 4, 50), ("wordle", 5, 30), ("wordle", 6, 20),
    ("wordle_withclue", 1, 100), ("wordle_withclue", 3, 100 / 3), ("wordle_withclue", 6, 100 / 6),
    ("wordle_withcritic", 2, 50), ("wordle_withcritic", 4, 25),
])
def test_main_score_tables(variant, guesses, expected):
    assert rules.main_score(variant, guesses, solved=True) == pytest.approx(expected)
    assert rules.main_score(variant, guesses, solved=False) == 0


def test_main_score_rejects_bad_input():
    with pytest.raises(ValueError):
        rules.main_score("wordle_plus", 3, True)
    with pytest.raises(ValueError):
        rules.main_score("wordle", 7, True)


# --- word data and instances ------------------------------------------------------------

def test_word_data_and_instances():
    allowed = solver_mod.load_word_list()
    assert 10_000 <= len(allowed) <= 13_000
    assert all(len(w) == 5 and w.isascii() and w.isalpha() and w.islower() for w in allowed.words)
    assert len(set(allowed.words)) == len(allowed.words)
    splits = {}
    for name in ("instances", "instances_train"):
        data = gametest.load_instances(GAME_DIR, name)
        rows = [(exp["name"], inst) for exp in data["experiments"] for inst in exp["game_instances"]]
        ids = [inst["game_id"] for _, inst in rows]
        assert all(isinstance(i, int) for i in ids) and len(set(ids)) == len(ids)
        for _, inst in rows:
            assert inst["target_word"] in allowed
            assert inst["clue"].strip() and inst["target_word"] not in inst["clue"].lower()
        splits[name] = Counter(exp for exp, _ in rows), {inst["target_word"] for _, inst in rows}
    eval_counts, eval_targets = splits["instances"]
    train_counts, train_targets = splits["instances_train"]
    assert eval_counts == {"high_frequency_words": 10, "medium_frequency_words": 20}
    assert train_counts["high_frequency_words"] >= 30 and train_counts["medium_frequency_words"] >= 60
    assert not eval_targets & train_targets


def test_instances_reproduce_from_seed():
    entries = load_json(GAME_DIR / "resources" / "target_words.json")
    split = instancegenerator.split_targets(entries, instancegenerator.SEED)
    for name, part in (("instances", "eval"), ("instances_train", "train")):
        data = gametest.load_instances(GAME_DIR, name)
        stored = {exp["name"]: [i["target_word"] for i in exp["game_instances"]]
                  for exp in data["experiments"]}
        assert stored == {f"{b}_words": [e["word"] for e in entries_] for b, entries_ in split[part].items()}
        for exp in data["experiments"]:
            for inst in exp["game_instances"]:
                assert instancegenerator.frequency_bin(inst["target_word"]) == exp["frequency_bin"]


def test_clemgame_json_lists_three_variants():
    specs = load_json(GAME_DIR / "clemgame.json")
    assert [s["game_name"] for s in specs] == list(VARIANTS)
    assert [s["players"] for s in specs] == [1, 1, 2]
    assert all(s["description"] and s["benchmark"] == ["2.0"] for s in specs)


# --- programmatic policies --------------------------------------------------------------

def _solve(solver, target, max_attempts=6):
    history = []
    for attempt in range(1, max_attempts + 1):
        guess = solver.best_guess(history)
        history.append((guess, rules.feedback(guess, target)))
        if guess == target:
            return attempt
    return None


def test_solver_solves_every_evaluation_target(solver):
    data = gametest.load_instances(GAME_DIR, "instances")
    targets = [i["target_word"] for _, i in gametest.all_instances(data)]
    attempts = [_solve(solver, t) for t in targets]
    assert None not in attempts
    assert sum(attempts) / len(attempts) <= 4.0


def test_solver_searches_rare_words_when_no_frequent_word_fits(monkeypatch):
    monkeypatch.setattr(solver_mod, "ANSWER_POOL_SIZE", 2)
    small = solver_mod.Solver(solver_mod.WordList(["crane", "slate", "vence", "hence", "dozen"]))
    history = [("crane", rules.feedback("crane", "vence"))]
    assert {small.word_list.words[i] for i in small.candidates(history)} == {"vence", "hence"}
    assert small.best_guess(history) in ("vence", "hence")


def test_solver_never_repeats_or_plays_excluded_words(solver):
    history = [("raise", rules.feedback("raise", "those"))]
    guess = solver.best_guess(history, exclude={"those"}, consistent_only=True)
    assert guess not in ("raise", "those")
    assert solver_mod.explain_inconsistency(guess, history) is None


def test_stored_opener_is_the_computed_one(solver):
    assert solver_mod.compute_opener(solver) == solver_mod.OPENER


@pytest.mark.parametrize("proposal,history,fragment", [
    ("crane", [("crane", rules.feedback("crane", "those"))], "already tried"),
    ("thumb", [("those", rules.feedback("those", "thumb"))], None),
    ("thorn", [("those", rules.feedback("those", "thumb"))], "'o' was red"),
    ("cloud", [("those", rules.feedback("those", "thumb"))], "position 1"),
    ("tacky", [("sheep", rules.feedback("sheep", "tacky"))], None),
    ("thane", [("sheep", rules.feedback("sheep", "those"))], "contains an 's'"),
])
def test_explain_inconsistency(proposal, history, fragment):
    reason = solver_mod.explain_inconsistency(proposal, history)
    if fragment is None:
        assert reason is None
    else:
        assert fragment in reason


# --- scripted episodes through the game master ------------------------------------------

INSTANCE = {"game_id": 7, "target_word": "those", "clue": "Not these, but ..."}


def play_scripted(bench, instance, scripts):
    """Play one episode with fixed replies per game role; returns (interactions, scores, gm)."""
    gm, interactions, scores, _ = gametest.play_episode(bench, {"name": "scripted"}, instance, scripts)
    return interactions, scores, gm


def guess(word, why="reasons"):
    return f"explanation: {why}\nguess: {word}"


def critic(agrees, why="reasons"):
    return f"explanation: {why}\nagreement: {'yes' if agrees else 'no'}"


def outcome(scores):
    return {k: scores[k] for k in ("Aborted", "Success", "Lose")}


@pytest.mark.parametrize("variant,words,expected_score", [
    ("wordle", ["those"], 100),
    ("wordle", ["crane", "plumb", "those"], 100),
    ("wordle", ["crane", "plumb", "sheep", "those"], 50),
    ("wordle", ["crane", "plumb", "sheep", "geese", "those"], 30),
    ("wordle", ["crane", "plumb", "sheep", "geese", "these", "those"], 20),
    ("wordle_withclue", ["crane", "plumb", "sheep", "those"], 25),
    ("wordle_withclue", ["crane", "those"], 50),
])
def test_scripted_success(benchmarks, variant, words, expected_score):
    interactions, scores, _ = play_scripted(benchmarks[variant], INSTANCE, {"Guesser": map(guess, words)})
    assert outcome(scores) == {"Aborted": 0, "Success": 1, "Lose": 0}
    assert scores["Main Score"] == pytest.approx(expected_score)
    assert scores["Attempts"] == len(words)
    assert interactions["guesses"] == words
    assert len(interactions["turns"]) == len(words)
    assert scores["Request Count"] == scores["Parsed Request Count"] == len(words)


@pytest.mark.parametrize("variant", ["wordle", "wordle_withclue"])
def test_scripted_lose_after_six_attempts(benchmarks, variant):
    words = ["crane", "plumb", "sheep", "geese", "these", "thumb", "those"]
    interactions, scores, _ = play_scripted(benchmarks[variant], INSTANCE, {"Guesser": map(guess, words)})
    assert outcome(scores) == {"Aborted": 0, "Success": 0, "Lose": 1}
    assert scores["Main Score"] == 0
    assert interactions["guesses"] == words[:6]
    assert interactions["guess_feedback"][2] == list(rules.feedback("sheep", "those"))


@pytest.mark.parametrize("bad_reply", ["guess: those", "explanation: x\nguess: thoses",
                                       "explanation: x\nguess: th0se", ""])
def test_scripted_format_error_aborts_at_once(benchmarks, bad_reply):
    _, scores, gm = play_scripted(benchmarks["wordle"], INSTANCE,
                                  {"Guesser": [guess("crane"), bad_reply, guess("those")]})
    assert outcome(scores) == {"Aborted": 1, "Success": 0, "Lose": 0}
    assert math.isnan(scores["Main Score"]) and math.isnan(scores["Attempts"])
    assert scores["Request Count"] == 2 and scores["Violated Request Count"] == 1
    assert gm.guesses == ["crane"]


def test_scripted_invalid_words_are_reprompted_up_to_the_limit(benchmarks):
    invalid = ["xqzvk", "aaaaa", "zzzzz", "qwyrt", "bcdfg"]
    assert not any(w in solver_mod.load_word_list() for w in invalid)
    # five invalid words are re-prompted and do not use attempts ...
    interactions, scores, _ = play_scripted(benchmarks["wordle"], INSTANCE,
                                            {"Guesser": [guess(w) for w in invalid] + [guess("those")]})
    assert outcome(scores) == {"Aborted": 0, "Success": 1, "Lose": 0}
    assert scores["Main Score"] == 100 and scores["Invalid Words"] == 5
    assert scores["Violated Request Count"] == 0 and scores["Request Count"] == 6
    reprompts = [e["action"]["content"] for e in interactions["turns"][0]
                 if e["to"] == "Player 1" and "not a valid word" in e["action"]["content"]]
    assert len(reprompts) == 5
    # ... the sixth invalid word aborts
    _, scores, _ = play_scripted(benchmarks["wordle"], INSTANCE,
                                 {"Guesser": [guess(w) for w in invalid + ["vwxyz"]] + [guess("those")]})
    assert outcome(scores) == {"Aborted": 1, "Success": 0, "Lose": 0}
    assert math.isnan(scores["Main Score"])


def test_scripted_invalid_words_count_over_the_whole_game(benchmarks):
    script = [guess("xqzvk"), guess("crane"), guess("aaaaa"), guess("zzzzz"), guess("plumb"),
              guess("qwert"), guess("bcdfg"), guess("vwxyz"), guess("those")]
    _, scores, gm = play_scripted(benchmarks["wordle_withclue"], INSTANCE, {"Guesser": script})
    assert outcome(scores)["Aborted"] == 1
    assert gm.guesses == ["crane", "plumb"]


def test_scripted_critic_only_the_committed_guess_counts(benchmarks):
    scripts = {"Guesser": [guess("crane"), guess("plumb"), guess("sheep"), guess("those")],
               "Critic": [critic(False), critic(True)]}
    interactions, scores, gm = play_scripted(benchmarks["wordle_withcritic"], INSTANCE, scripts)
    assert outcome(scores) == {"Aborted": 0, "Success": 1, "Lose": 0}
    assert interactions["proposals"] == ["crane", "sheep"]
    assert interactions["guesses"] == ["plumb", "those"]
    assert interactions["critic_agreements"] == [0, 1]
    assert scores["Main Score"] == 50
    assert scores["Critic Agreement Rate"] == 0.5
    assert scores["Kept Guess After Disagreement Rate"] == 0.0
    assert scores["Request Count"] == 6
    # the critic saw the clue, the proposal and (in round 2) the feedback for plumb
    critic_view = [e["action"]["content"] for turn in interactions["turns"] for e in turn
                   if e["to"] == "Player 2" and e["action"]["type"] == "send message"]
    assert "clue: Not these, but ..." in critic_view[0] and "guesser_guess: crane" in critic_view[0]
    assert critic_view[1].startswith("guess_feedback: " + rules.format_feedback(
        "plumb", rules.feedback("plumb", "those")))


def test_scripted_critic_lose_and_invalid_proposal(benchmarks):
    wrong = ["crane", "plumb", "sheep", "geese", "these", "thumb"]
    scripts = {"Guesser": [guess("xqzvk")] + [guess(w) for w in wrong for _ in range(2)],
               "Critic": cycle([critic(True)])}
    interactions, scores, _ = play_scripted(benchmarks["wordle_withcritic"], INSTANCE, scripts)
    assert outcome(scores) == {"Aborted": 0, "Success": 0, "Lose": 1}
    assert scores["Main Score"] == 0 and scores["Invalid Words"] == 1
    assert interactions["guesses"] == wrong


@pytest.mark.parametrize("bad_critic", ["agreement: yes", "explanation: ok\nagreement: perhaps", ""])
def test_scripted_critic_format_error_aborts(benchmarks, bad_critic):
    scripts = {"Guesser": [guess("crane")], "Critic": [bad_critic]}
    _, scores, _ = play_scripted(benchmarks["wordle_withcritic"], INSTANCE, scripts)
    assert outcome(scores) == {"Aborted": 1, "Success": 0, "Lose": 0}
    assert math.isnan(scores["Main Score"]) and scores["Violated Request Count"] == 1


def test_unknown_variant_and_bad_target_fail_loudly(benchmarks):
    gm = benchmarks["wordle"].create_game_master({"name": "x"}, [CustomResponseModel()])
    spec = GameSpec.from_directory(str(GAME_DIR))[0]
    spec.game_name = "wordle_plus"
    with pytest.raises(ValueError, match="unknown wordle variant"):
        type(gm)(spec, {"name": "x"}, [CustomResponseModel()])
    with pytest.raises(ValueError, match="allowed_words"):
        gm.setup(game_id=0, target_word="qqqqq", clue="none")


# --- programmatic players inside the game master ----------------------------------------

def play_programmatic(bench, instance):
    gm, interactions, _, _ = gametest.play_episode(bench, {"name": "programmatic"}, instance)
    return interactions, gm


def test_programmatic_critic_game_shows_disagreement_and_reaction(benchmarks):
    # 'raise' against 'earth' leaves many candidates: the guesser proposes an informative
    # word that contradicts the feedback, the critic objects, the guesser commits a fitting one
    instance = {"game_id": 1, "target_word": "earth", "clue": "Our planet"}
    interactions, gm = play_programmatic(benchmarks["wordle_withcritic"], instance)
    assert interactions["Success"] == 1
    assert 0 in interactions["critic_agreements"]
    for proposal, committed, agreed in zip(interactions["proposals"], interactions["guesses"],
                                           interactions["critic_agreements"]):
        assert (proposal == committed) == bool(agreed)
    history = list(zip(gm.guesses, gm.colors))
    for k, word in enumerate(gm.guesses[1:], start=1):
        assert solver_mod.explain_inconsistency(word, history[:k]) is None


def test_programmatic_guesser_keeps_the_only_fitting_word_after_a_no(benchmarks):
    gm = benchmarks["wordle_withcritic"].create_game_master({"name": "x"}, [CustomResponseModel()] * 2)
    gm.setup(game_id=0, target_word="those", clue="Not these")
    guesser = gm.guesser
    history = [(w, rules.feedback(w, "those")) for w in ("raise", "cloth", "ghost")]
    assert [gm.word_list.words[i] for i in solver_mod.default_solver().candidates(history)] == ["those"]
    feedback_text = "\n".join(f"guess_feedback: {rules.format_feedback(w, c)}" for w, c in history)
    guesser.perceive_context({"role": "user", "content": feedback_text}, log_event=False)
    guesser.perceive_response(guess("those"), log_event=False)
    verdict = {"role": "user", "content": "critic_agreement: no\ncritic_explanation: I doubt it"}
    guesser.perceive_context(verdict, log_event=False)
    assert rules.parse_guess_reply(guesser._custom_response(verdict)).guess == "those"


def test_programmatic_critic_rejects_a_clue_word(benchmarks):
    critic_player = benchmarks["wordle_withcritic"].create_game_master(
        {"name": "x"}, [CustomResponseModel()] * 2)
    critic_player.setup(game_id=0, target_word="ocean", clue="The Pacific or the ocean")
    context = {"role": "user", "content": "There is no feedback yet.\nclue: The Pacific or the ocean\n"
                                          "guesser_explanation: x\nguesser_guess: ocean\n"}
    reply = rules.parse_critic_reply(critic_player.critic._custom_response(context))
    assert reply.agrees is False and "clue" in reply.explanation


# --- end to end with the clem CLI -------------------------------------------------------

@pytest.fixture
def wordle_workspace(clem_workspace):
    """clem_workspace whose registry holds only the wordle folder, so that one `clem run`
    with the selector {"main_game": "wordle"} plays exactly the three variants (a spec
    without a main_game key would unify with that selector too). Each clem call costs
    ~5 s of clemcore import on top of the games: one run instead of three."""
    (clem_workspace / "game_registry.json").write_text(
        json.dumps([{"benchmark_path": str(GAME_DIR)}]), encoding="utf-8")
    return clem_workspace


def test_clem_run_score_eval_programmatic(wordle_workspace, clem_here):
    # one programmatic model: clemcore gives it to both players of wordle_withcritic
    results = gametest.clem_run_score_eval(clem_here, wordle_workspace, json.dumps({"main_game": "wordle"}))
    assert not list(results.rglob("error.json"))
    row = gametest.results_row(results)
    quality = {}
    for variant in VARIANTS:
        assert float(row[f"{variant}, % Played"]) == 100.0
        quality[variant] = float(row[f"{variant}, Quality Score"])
        scores = gametest.episode_scores(results, variant)
        assert len(scores) == 30
        assert all(s["Aborted"] == 0 and s["Success"] + s["Lose"] == 1 for s in scores)
        assert sum(s["Success"] for s in scores) >= 27
        mean = float(np.mean([s["Main Score"] for s in scores]))
        assert quality[variant] == pytest.approx(mean, abs=0.01)
    critic_episode = next((results / "programmatic" / "wordle_withcritic").rglob("interactions.json"))
    players = load_json(critic_episode)["players"]
    assert players["Player 1"] == {"game_role": "Guesser", "model_name": "programmatic"}
    assert players["Player 2"] == {"game_role": "Critic", "model_name": "programmatic"}
    assert quality["wordle"] >= 60
    assert quality["wordle_withclue"] >= 25 and quality["wordle_withcritic"] >= 25
