"""privateshared: parsers and rules, score arithmetic (also against real clembench records),
scripted episodes (success / lose / aborted), instance sets, and clem run/score/eval end to end."""
import json
import math
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import gametest
from gametest import RECORDS_DIR, outcome

GAME_DIR = gametest.BUILTIN_GAMES / "privateshared"

# the rules module keeps its own name: master.py then imports the very same module (and error classes)
rules = gametest.load_module(GAME_DIR, "privateshared_rules")

from clemcore.backends import Model  # noqa: E402  (after the rules: clemcore import order)
from clemcore.backends.model_registry import CustomResponseModel, ModelSpec  # noqa: E402
from clemcore.clemgame import GameBenchmark  # noqa: E402
from clemcore.clemgame.errors import ParseError  # noqa: E402
from clemcore.clemgame.registry import GameSpec  # noqa: E402

EVAL = gametest.load_instances(GAME_DIR, "instances")
TRAIN = gametest.load_instances(GAME_DIR, "instances_train")


def experiment_and_instance(name: str, index: int = 0):
    experiment = next(e for e in EVAL["experiments"] if e["name"] == name)
    return experiment, experiment["game_instances"][index]


# --- parsers ----------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("ANSWER: Tallinn.", "Tallinn."),
    ("  ANSWER: Tallinn  \n", "Tallinn"),
    ("answer: tallinn", "tallinn"),
    ("Answer:Tallinn", "Tallinn"),
    ("ANSWER: ANSWER: Tallinn", "ANSWER: Tallinn"),
    ("ANSWER: Zürich 🚆 über alles", "Zürich 🚆 über alles"),
    ("ANSWER: " + "x" * 10_000, "x" * 10_000),
    ("ANSWER: ME: Does the agent know? ASIDE: yes", "ME: Does the agent know? ASIDE: yes"),
])
def test_parse_answer_accepts(text, expected):
    assert rules.parse_answer(text) == expected


@pytest.mark.parametrize("text", [
    "", "   ", "\n\n", "Tallinn", "ANSWER:", "ANSWER:    ", "ANSWER : Tallinn", " ANS WER: x",
    "ANSWER: Tallinn\nASIDE: yes", "ANSWER: Tallinn\r\nmore", "ANSWER: a\u2028b", "ASIDE: yes",
    "x" * 10_000, "Sure! ANSWER: Tallinn", "ＡＮＳＷＥＲ: Tallinn", None, 42,
])
def test_parse_answer_rejects(text):
    with pytest.raises(rules.AnswerFormatError) as error:
        rules.parse_answer(text)
    assert isinstance(error.value, ParseError)


@pytest.mark.parametrize("text, expected", [
    ("ASIDE: yes", True), ("ASIDE: no", False), ("ASIDE: Yes.", True), ("ASIDE: NO!", False),
    ("aside: no", False), ("ASIDE:yes", True), ("  ASIDE: no  \n", False), ("ASIDE: yes . ", True),
])
def test_parse_aside_accepts(text, expected):
    assert rules.parse_aside(text) is expected


@pytest.mark.parametrize("text", [
    "", " ", "yes", "No.", "ASIDE:", "ASIDE: maybe", "ASIDE: yes, they do", "ASIDE: ASIDE: yes",
    "ASIDE: yes\nASIDE: no", "ANSWER: yes", "ASIDE : yes", "ASIDE: yés", "ASIDE: " + "y" * 10_000,
    "ME: Does the agent know? ASIDE: yes", None,
])
def test_parse_aside_rejects(text):
    with pytest.raises(rules.AsideFormatError) as error:
        rules.parse_aside(text)
    assert isinstance(error.value, ParseError)


@given(st.text(max_size=300))
def test_parsers_raise_only_parse_errors(text):
    for parse in (rules.parse_answer, rules.parse_aside):
        try:
            result = parse(text)
        except ParseError:
            continue
        assert result is not None


@given(st.text(max_size=200).filter(lambda c: c.strip() and len(c.splitlines()) == 1),
       st.sampled_from(["ANSWER:", "answer:", "Answer: "]), st.sampled_from(["", " ", "\n", " \t\n"]))
def test_parse_answer_round_trip(content, prefix, trailing):
    assert rules.parse_answer(prefix + content + trailing) == content.strip()


@given(st.booleans(), st.sampled_from(["ASIDE:", "aside: ", "Aside:  "]),
       st.sampled_from(["", ".", "!", " .", "..."]), st.sampled_from(["", " ", "\n"]))
def test_parse_aside_round_trip(said_yes, prefix, punctuation, trailing):
    word = "yes" if said_yes else "no"
    assert rules.parse_aside(f"{prefix}{word.upper()}{punctuation}{trailing}") is said_yes


# --- slot matching ----------------------------------------------------------------------

@pytest.mark.parametrize("text, value, expected", [
    ("ANSWER: Tallinn.", "Tallinn", True),
    ("I would like the crème brûlée!", "crème brûlée", True),
    ("creme brulee", "Crème Brûlée", True),
    ("Leaving on New Year's Eve", "New Year's Eve", True),
    ("ANSWER: 17", "7", False),
    ("mid July", "mid-July", True),
    ("iced tea", "tea cake", False),
    ("It's 42", "S", True),  # why letters such as S are not used as card values
    ("", "Tallinn", False),
    ("anything", "", False),
])
def test_mentions(text, value, expected):
    assert rules.mentions(text, value) is expected


@given(st.text(max_size=50), st.text(max_size=50), st.text(min_size=1, max_size=30))
def test_mentions_finds_value_between_spaces(before, after, value):
    assert rules.mentions(f"{before} {value} {after}", value) == bool(rules.normalize(value))


@given(st.text(alphabet=st.characters(max_codepoint=127), min_size=1, max_size=30))
def test_mentions_ignores_case_and_punctuation(value):
    assert rules.mentions(f"({value.swapcase()})!", value) == bool(rules.normalize(value))


# --- score arithmetic -------------------------------------------------------------------

labels = st.lists(st.booleans(), min_size=1, max_size=60)


@given(st.data())
def test_kappa_bounds_and_symmetry(data):
    truth = data.draw(labels)
    answers = data.draw(st.lists(st.booleans(), min_size=len(truth), max_size=len(truth)))
    kappa = rules.cohen_kappa(truth, answers)
    assert -1.0 <= kappa <= 1.0
    assert kappa == pytest.approx(rules.cohen_kappa(answers, truth))
    assert rules.cohen_kappa(truth, truth) == 1.0


@given(labels)
def test_kappa_of_inverted_answers_is_not_positive(truth):
    inverted = [not t for t in truth]
    assert rules.cohen_kappa(truth, inverted) <= 0.0


@given(st.booleans(), labels)
def test_kappa_with_one_constant_rater(label, answers):
    truth = [label] * len(answers)
    expected = 1.0 if all(a == label for a in answers) else 0.0
    assert rules.cohen_kappa(truth, answers) == pytest.approx(expected)


def test_kappa_edge_cases():
    assert math.isnan(rules.cohen_kappa([], []))
    assert rules.cohen_kappa([True, False], [False, True]) == -1.0
    assert rules.cohen_kappa([False] * 30, [False] * 30) == 1.0
    with pytest.raises(ValueError):
        rules.cohen_kappa([True], [True, False])


unit = st.floats(min_value=0.0, max_value=1.0)


@given(unit, unit)
def test_harmonic_mean_bounds(a, b):
    mean = rules.harmonic_mean(a, b)
    assert min(a, b) - 1e-12 <= mean <= max(a, b) + 1e-12
    assert mean == pytest.approx(rules.harmonic_mean(b, a))
    assert rules.harmonic_mean(a, a) == pytest.approx(a)


@given(unit, st.floats(min_value=-1.0, max_value=1.0))
def test_main_score_bounds(slot_accuracy, kappa):
    score = rules.main_score(slot_accuracy, kappa)
    assert 0.0 <= score <= 100.0
    if kappa <= 0 or slot_accuracy == 0:
        assert score == 0.0


@given(unit)
def test_nan_propagates(x):
    assert math.isnan(rules.harmonic_mean(math.nan, x))
    assert math.isnan(rules.harmonic_mean(x, math.nan))
    assert math.isnan(rules.main_score(x, math.nan))
    assert math.isnan(rules.main_score(math.nan, x))


def test_main_score_values():
    assert rules.main_score(1.0, 1.0) == 100.0
    assert rules.main_score(1.0, 0.6) == pytest.approx(75.0)
    assert rules.main_score(0.8, -0.4) == 0.0
    with pytest.raises(ValueError):
        rules.harmonic_mean(-0.1, 0.5)


def _recorded_episodes():
    return sorted(RECORDS_DIR.glob("*/privateshared/*/episode_*/scores.json"))


@pytest.mark.parametrize("scores_path", _recorded_episodes(), ids=lambda p: "/".join(p.parts[-5:-1]))
def test_score_arithmetic_matches_clembench_records(scores_path):
    recorded = json.loads(scores_path.read_text(encoding="utf-8"))["episode scores"]
    interactions = json.loads((scores_path.parent / "interactions.json").read_text(encoding="utf-8"))
    probes = [p for round_probes in interactions["probes"] for p in round_probes]
    kappa = rules.cohen_kappa([p["gt"] for p in probes], [p["value"] for p in probes])
    assert kappa == pytest.approx(recorded["Kappa"])
    assert rules.main_score(recorded["Slot-Filling-Accuracy"], kappa) == pytest.approx(recorded["Main Score"])


def test_parsers_agree_with_clembench_records():
    """Every recorded probe reply parses as the original game master parsed it (NA = invalid)."""
    checked = 0
    for path in RECORDS_DIR.glob("*/privateshared/*/episode_*/interactions.json"):
        for turn in json.loads(path.read_text(encoding="utf-8"))["turns"]:
            for reply, parse in zip(turn, turn[1:]):
                if reply["action"]["type"] != "probe answer":
                    continue
                recorded = parse["action"]["content"]
                if recorded == "NA":
                    with pytest.raises(ParseError):
                        rules.parse_aside(reply["action"]["content"])
                else:
                    assert rules.parse_aside(reply["action"]["content"]) is (recorded == "yes")
                checked += 1
    assert checked > 100


# --- scripted episodes ------------------------------------------------------------------

@pytest.fixture(scope="module")
def benchmark():
    spec = GameSpec.from_directory(str(GAME_DIR))[0]
    bench = GameBenchmark.load_from_spec(spec)
    yield bench
    bench.close()


class TamperedAnswerer(Model):
    """Replies like the programmatic Answerer except where `tamper(step, context, reply)`
    returns something else."""

    def __init__(self, tamper):
        super().__init__(ModelSpec(model_name="tampered"))
        self.set_gen_args(temperature=0.0, max_tokens=100)
        self.tamper = tamper
        self.player = None  # set once the game master has created its Answerer
        self.step = 0

    def generate_response(self, messages):
        context = messages[-1]
        reply = self.tamper(self.step, context["content"], self.player._custom_response(context))
        self.step += 1
        return messages, {"reply": reply}, reply


def play(benchmark, experiment, instance, model):
    """Drive one episode like clemcore's sequential runner; return (gm, interactions, episode scores)."""
    gm, recorder = gametest.start_episode(benchmark, experiment, instance, [model])
    if isinstance(model, TamperedAnswerer):
        model.player = gm.answerer
    gametest.play_to_end(gm, max_steps=100)
    interactions = json.loads(json.dumps(recorder.interactions))  # must survive the file round trip
    return gm, interactions, gametest.score_episode(benchmark, experiment, instance, interactions)


@pytest.mark.parametrize("experiment_name", [e["name"] for e in EVAL["experiments"]])
def test_programmatic_answerer_succeeds(benchmark, experiment_name):
    experiment, instance = experiment_and_instance(experiment_name, 3)
    gm, interactions, scores = play(benchmark, experiment, instance, CustomResponseModel())
    assert outcome(scores) == "Success"
    assert scores["Main Score"] == 100.0
    assert scores["Slot-Filling-Accuracy"] == 1.0 and scores["Kappa"] == 1.0
    assert interactions["Request Count"] == [5, 6, 6, 6, 6, 6]
    assert scores["Request Count"] == 35 and scores["Violated Request Count"] == 0
    assert interactions["players"]["Player 2"]["game_role"] == "Questioner"
    asked = [e["action"]["content"] for turn in interactions["turns"] for e in turn
             if e["from"] == "GM" and e["to"] == "Player 2" and e["action"]["content"].startswith("REQUEST:")]
    assert asked == [f"REQUEST: {slot}" for slot in instance["question_order"]]


def test_probes_stay_out_of_the_answerer_memory(benchmark):
    experiment, instance = experiment_and_instance("travel-booking")
    gm, interactions, _ = play(benchmark, experiment, instance, CustomResponseModel())
    memory = gm.answerer.get_perspective()
    assert [m["role"] for m in memory] == ["user", "assistant"] * 5
    assert memory[0]["content"].startswith(instance["initial_prompt"])
    assert not any("ME:" in m["content"] or "ASIDE" in m["content"] for m in memory[1:])
    labels = [e["action"].get("label") for turn in interactions["turns"] for e in turn
              if "Player 1" in (e["from"], e["to"])]
    assert labels.count("forget") == 2 * 30 and labels.count("context") == 5 and labels.count("response") == 5
    # the instructions travel with the round-0 probes, which are not memorised
    first_probe = interactions["turns"][0][0]["action"]["content"]
    assert first_probe.startswith(instance["initial_prompt"]) and "\n\nME: " in first_probe


def test_wrong_probe_loses(benchmark):
    experiment, instance = experiment_and_instance("restaurant")
    model = TamperedAnswerer(lambda step, context, reply: "ASIDE: yes" if step == 0 else reply)
    _, _, scores = play(benchmark, experiment, instance, model)
    assert outcome(scores) == "Lose"
    # 30 probes, truth 15 yes / 15 no; one "no" answered "yes": kappa = 14/15
    assert scores["Kappa"] == pytest.approx(14 / 15)
    assert scores["Main Score"] == pytest.approx(100 * 28 / 29)


def test_unfilled_slot_loses(benchmark):
    experiment, instance = experiment_and_instance("job-interview")
    first_answer = "ANSWER: I would rather not say."

    def tamper(step, context, reply):
        return first_answer if step == 5 else reply  # steps 0-4 are the round-0 probes

    _, interactions, scores = play(benchmark, experiment, instance, TamperedAnswerer(tamper))
    assert outcome(scores) == "Lose"
    assert interactions["Filled Slots"] == [False, True, True, True, True]
    # the policy believes it revealed the first slot: 5 wrong "yes"; truth 10 yes / 20 no
    kappa = Fraction(2, 3)
    slot_accuracy = Fraction(4, 5)
    assert scores["Slot-Filling-Accuracy"] == pytest.approx(0.8)
    assert scores["Kappa"] == pytest.approx(float(kappa))
    assert scores["Main Score"] == pytest.approx(float(100 * 2 * slot_accuracy * kappa / (slot_accuracy + kappa)))


def test_anticipated_value_counts_as_known(benchmark):
    experiment, instance = experiment_and_instance("letter-number")
    first, second = instance["question_order"][:2]
    both = f"ANSWER: {instance['slots'][first]} and {instance['slots'][second]}"
    model = TamperedAnswerer(lambda step, context, reply: both if step == 5 else reply)
    _, interactions, scores = play(benchmark, experiment, instance, model)
    round1 = {p["slot"]: p["truth"] for p in interactions["probes"][1]}
    assert round1[first] and round1[second]
    assert sum(round1.values()) == 2
    assert outcome(scores) == "Lose"  # the policy itself only counted the first slot


def test_unparsable_answer_aborts(benchmark):
    experiment, instance = experiment_and_instance("things-places")
    model = TamperedAnswerer(lambda step, context, reply: reply.removeprefix("ANSWER: ") if step == 5 else reply)
    _, interactions, scores = play(benchmark, experiment, instance, model)
    assert outcome(scores) == "Aborted"
    assert math.isnan(scores["Main Score"]) and math.isnan(scores["Kappa"])
    assert math.isnan(scores["Slot-Filling-Accuracy"])
    assert scores["Request Count"] == 6 and scores["Violated Request Count"] == 1


def test_unparsable_probe_aborts_after_five_tries(benchmark):
    experiment, instance = experiment_and_instance("travel-booking", 1)
    model = TamperedAnswerer(lambda step, context, reply: "No." if step < 5 else reply)
    _, interactions, scores = play(benchmark, experiment, instance, model)
    assert outcome(scores) == "Aborted"
    assert math.isnan(scores["Main Score"])
    assert interactions["Request Count"] == [5] and interactions["Violated Request Count"] == [5]


def test_probe_retry_recovers(benchmark):
    experiment, instance = experiment_and_instance("travel-booking", 2)
    contexts = []

    def tamper(step, context, reply):
        contexts.append(context)
        return "no" if step < 4 else reply

    _, interactions, scores = play(benchmark, experiment, instance, TamperedAnswerer(tamper))
    assert outcome(scores) == "Success" and scores["Main Score"] == 100.0
    assert interactions["Request Count"][0] == 9 and interactions["Violated Request Count"][0] == 4
    assert "Your last reply was not in the requested form." in contexts[1]
    assert interactions["probes"][0][0]["tries"] == 5


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=400), answer_phase=st.booleans())
def test_game_master_survives_any_reply(benchmark, text, answer_phase):
    experiment, instance = experiment_and_instance("restaurant")
    gm = benchmark.create_game_master(experiment, [CustomResponseModel()])
    gm.setup(**instance)
    gm.before_game()
    if answer_phase:  # play round 0 correctly, then reply to the first request with `text`
        for _ in range(5):
            gm.step("ASIDE: no")
    gm.step(text)  # must not raise
    assert gm.state.outcome.value in ("running", "aborted")


# --- instance sets ----------------------------------------------------------------------

def _combinations(instances: dict) -> dict:
    return {e["name"]: [tuple(i["slots"].values()) for i in e["game_instances"]] for e in instances["experiments"]}


def test_instance_sets_sizes_and_disjointness():
    evaluation, training = _combinations(EVAL), _combinations(TRAIN)
    assert set(evaluation) == set(training) == {
        "travel-booking", "job-interview", "restaurant", "things-places", "letter-number"}
    for name in evaluation:
        assert len(evaluation[name]) == len(set(evaluation[name])) == 10
        assert len(training[name]) == len(set(training[name])) == 20
        assert not set(evaluation[name]) & set(training[name]), name


def test_instances_are_well_formed():
    for instances in (EVAL, TRAIN):
        for experiment in instances["experiments"]:
            ids = [i["game_id"] for i in experiment["game_instances"]]
            assert ids == list(range(len(ids)))
            for instance in experiment["game_instances"]:
                slots = instance["slots"]
                assert len(slots) == 5
                assert sorted(instance["question_order"]) == sorted(slots)
                assert set(instance["requests"]) == set(instance["probes"]) == set(slots)
                for slot, value in slots.items():
                    assert f"{slot}: {value}" in instance["initial_prompt"]
                    assert not any(rules.mentions(other, value) for o, other in slots.items() if o != slot)


def test_instance_generator_is_reproducible():
    generator_module = gametest.load_module(GAME_DIR, "privateshared_instancegenerator", "instancegenerator")
    for split, (filename, _, _) in generator_module.SPLITS.items():
        generator = generator_module.PrivateSharedInstanceGenerator()
        generator.on_generate(generator_module.SEED, split=split)
        written = json.loads(json.dumps(generator.instances))
        assert written == gametest.load_instances(GAME_DIR, Path(filename).stem)


# --- end to end with the clem CLI -------------------------------------------------------

def test_clem_run_score_eval(clem_workspace, clem_here):
    results = gametest.clem_run_score_eval(clem_here, clem_workspace, "privateshared")
    scores = gametest.episode_scores(results, "privateshared")
    assert len(scores) == 50
    assert all(s["Success"] == 1 and s["Main Score"] == 100.0 for s in scores)
    assert not list(results.rglob("error.json"))

    row = gametest.results_row(results)
    assert float(row["privateshared, % Played"]) == 100.0
    assert float(row["privateshared, Quality Score"]) == 100.0

    from clemcore.clemgame.transcripts.builder import build_transcript
    interactions_path = next(results.glob("programmatic/privateshared/restaurant/instance_00000/interactions.json"))
    transcript = build_transcript(json.loads(interactions_path.read_text(encoding="utf-8")))
    assert "Questioner" in transcript and "Answerer" in transcript
