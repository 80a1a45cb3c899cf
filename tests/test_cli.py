"""The playpen CLI: help, listing, and every user error (one line, exit 2, nothing written)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from playpen.cli import cli

REPO_ROOT = Path(__file__).resolve().parents[1]


def invoke(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def files_under(path: Path) -> set:
    return {p.relative_to(path) for p in path.rglob("*")}


def test_help_does_not_import_heavy_modules():
    code = ("import sys; from click.testing import CliRunner; from playpen.cli import cli;"
            "r = CliRunner().invoke(cli, ['--help']); assert r.exit_code == 0, r.output;"
            "heavy = [m for m in ('torch', 'transformers', 'clemcore', 'trl') if m in sys.modules];"
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_public_api_resolves_lazily():
    code = ("import sys, playpen;"
            "heavy = [m for m in ('torch', 'transformers', 'clemcore', 'trl') if m in sys.modules];"
            "assert not heavy, heavy;"
            "from playpen import rollouts as rollout_module, envs, evaluation, rewards;"
            "names = ['Learner', 'SamplingConfig', 'Branching', 'InstanceRef', 'Trajectory', 'EpisodeResult',"
            "         'RolloutResult'];"
            "assert all(getattr(playpen, n) is getattr(rollout_module, n) for n in names);"
            "assert playpen.GameEnv is envs.GameEnv and playpen.OutcomeReward is rewards.OutcomeReward;"
            "assert playpen.evaluate is evaluation.evaluate;"
            "assert all(hasattr(playpen, n) for n in playpen.__all__), playpen.__all__;"
            "assert {'Learner', 'GameEnv', 'evaluate', 'BasePlayPen'} <= set(playpen.__all__)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_version():
    result = invoke("--version")
    assert result.exit_code == 0
    assert "playpen, version" in result.output


def test_list_models_shows_default_model(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO_ROOT)
    result = invoke("list", "models")
    assert result.exit_code == 0
    first = [line for line in result.output.splitlines() if "smol-135m" in line][0]
    assert "huggingface_local" in first and "model_registry.json" in first


def test_list_models_verbose_from_empty_dir_uses_builtin_entry(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("list", "models", "-v")
    assert result.exit_code == 0
    assert "smol-135m" in result.output and "playpen (built-in)" in result.output


def test_list_backends():
    result = invoke("list", "backends")
    assert result.exit_code == 0
    assert "huggingface_local" in result.output and "openai_compatible" in result.output


def test_list_games_includes_extra_registry_folder(tmp_path, monkeypatch):
    extra = tmp_path / "mygames" / "hello"
    extra.mkdir(parents=True)
    (extra / "clemgame.json").write_text(json.dumps(
        {"game_name": "hello", "players": 1, "description": "a user game", "benchmark": []}))
    (tmp_path / "game_registry.json").write_text(json.dumps([{"benchmark_path": "mygames"}]))
    monkeypatch.chdir(tmp_path)
    result = invoke("list", "games")
    assert result.exit_code == 0
    assert "hello" in result.output
    result = invoke("list", "games", "-s", "hello", "-v")
    assert "a user game" in result.output and str(extra) in result.output


def test_unknown_model_names_close_matches(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    trainer = tmp_path / "t.py"
    trainer.write_text(TRAINER_OK)
    before = files_under(tmp_path)
    result = CliRunner().invoke(cli, ["run", str(trainer), "-l", "smol-13m"])
    assert result.exit_code == 2
    assert "unknown model 'smol-13m'" in result.output
    assert "smol-135m" in result.output and "playpen list models" in result.output
    assert "Traceback" not in result.output
    assert files_under(tmp_path) == before


def test_unknown_teacher_is_resolved_from_teacher_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    trainer = tmp_path / "t.py"
    trainer.write_text(TRAINER_OK)
    result = CliRunner().invoke(cli, ["run", str(trainer), "-l", "smol-135m", "-t", "no-such-teacher"])
    assert result.exit_code == 2
    assert "unknown model 'no-such-teacher'" in result.output


def test_unknown_game(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["list", "games", "-s", "tabooo"])
    assert result.exit_code == 2
    assert "unknown game 'tabooo'" in result.output


@pytest.mark.parametrize("registry_file,body,expected", [
    ("model_registry.json", '[{"model_name": "x",\n "backend": }]', "model_registry.json:2:13: malformed JSON"),
    ("game_registry.json", '[\n\n{"benchmark_path": "a",,}]', "game_registry.json:3:24: malformed JSON"),
])
def test_malformed_registry_names_file_and_line(tmp_path, monkeypatch, registry_file, body, expected):
    (tmp_path / registry_file).write_text(body)
    monkeypatch.chdir(tmp_path)
    what = "models" if registry_file.startswith("model") else "games"
    result = CliRunner().invoke(cli, ["list", what])
    assert result.exit_code == 2
    assert expected in result.output
    assert result.output.count("\n") == 1
    assert (tmp_path / registry_file).read_text() == body


def test_registry_entry_missing_fields(tmp_path, monkeypatch):
    (tmp_path / "model_registry.json").write_text(json.dumps([{"model_name": "m", "backend": "huggingface_local"}]))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["list", "models"])
    assert result.exit_code == 2
    assert "model 'm': huggingface_local needs 'huggingface_id'" in result.output


def test_debug_flag_shows_traceback(tmp_path, monkeypatch):
    (tmp_path / "model_registry.json").write_text("[")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["--debug", "list", "models"])
    assert result.exit_code != 0
    assert result.exception is not None and "malformed JSON" in str(result.exception)


TRAINER_OK = '''
from playpen import BasePlayPen

class Recorder(BasePlayPen):
    def learn(self, game_registry):
        import json
        names = sorted(g.game_name for g in game_registry)
        out = {"learner": self.learner.name,
               "teacher": self.teacher.name if self.teacher else None,
               "games": names, "seed": self.seed, "output_dir": str(self.output_dir),
               "gen_args": self.learner.gen_args}
        open("learn_called.json", "w").write(json.dumps(out))
'''


@pytest.mark.parametrize("content,expected", [
    (None, "does not exist"),
    ("x = (\n", "syntax error"),
    ("import no_such_module_xyz\n", "import failed"),
    ("from playpen import BasePlayPen\nclass A: pass\n", "defines no BasePlayPen subclass"),
    ("from playpen import BasePlayPen\nclass A(BasePlayPen):\n    def learn(self, g): pass\n"
     "class B(BasePlayPen):\n    def learn(self, g): pass\n", "several BasePlayPen subclasses (A, B)"),
])
def test_bad_trainer_files(tmp_path, monkeypatch, content, expected):
    monkeypatch.chdir(tmp_path)
    trainer = tmp_path / "trainer.py"
    if content is not None:
        trainer.write_text(content)
    before = files_under(tmp_path)
    result = CliRunner().invoke(cli, ["run", str(trainer), "-l", "smol-135m"])
    assert result.exit_code == 2, result.output
    assert expected in result.output
    assert "Traceback" not in result.output
    assert files_under(tmp_path) - before <= {Path("__pycache__")} | {
        p for p in files_under(tmp_path) if "__pycache__" in str(p)}


def test_trainer_file_must_be_python(tmp_path):
    other = tmp_path / "trainer.txt"
    other.write_text("hello")
    result = CliRunner().invoke(cli, ["run", str(other), "-l", "smol-135m"])
    assert result.exit_code == 2 and "must be a Python file" in result.output


def test_run_requires_file_and_learner(tmp_path):
    result = CliRunner().invoke(cli, ["run"])
    assert result.exit_code == 2 and "missing TRAINER" in result.output and "playpen run --list" in result.output
    trainer = tmp_path / "t.py"
    trainer.write_text(TRAINER_OK)
    result = CliRunner().invoke(cli, ["run", str(trainer)])
    assert result.exit_code == 2 and "missing learner" in result.output


def test_run_list_names_every_packaged_trainer_without_heavy_imports():
    from playpen.training.catalog import TRAINERS
    result = invoke("run", "--list")
    assert result.exit_code == 0
    lines = result.output.strip().splitlines()
    assert [line.split()[0] for line in lines] == list(TRAINERS)
    assert all(len(line.split(None, 1)) == 2 for line in lines)  # a name and its description
    code = ("import sys; from click.testing import CliRunner; from playpen.cli import cli;"
            "r = CliRunner().invoke(cli, ['run', '--list']); assert r.exit_code == 0, r.output;"
            "heavy = [m for m in ('torch', 'transformers', 'clemcore', 'trl') if m in sys.modules];"
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_an_unknown_trainer_name_is_one_line_naming_the_valid_ones(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["run", "sfft", "-l", "smol-135m"])
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert "unknown trainer 'sfft'" in result.output and "Did you mean: sft" in result.output
    assert "grpo, grpo-teacher" in result.output and "TRAINER.py" in result.output
    assert files_under(tmp_path) == set()


def test_a_packaged_trainer_runs_by_name_and_shows_its_options():
    result = invoke("run", "sft", "--help")
    assert result.exit_code == 0
    assert "Trainer SFTLoraTrainer (sft)" in result.output and "--init-adapter" in result.output
    result = CliRunner().invoke(cli, ["run", "dpo", "-l", "smol-135m", "--betta", "0.2"])
    assert result.exit_code == 2 and "unknown option '--betta'" in result.output and "--beta" in result.output


@pytest.mark.parametrize("name", ["sft", "grpo", "grpo-teacher", "dpo", "spin", "self-rewarding", "spag",
                                  "hierarchical-grpo", "sft-full", "fsp", "league", "pipeline"])
def test_each_example_file_runs_the_packaged_trainer_of_its_name(name):
    """examples/trl/ holds thin files that `playpen run FILE` runs: each imports its packaged
    trainer, and nothing in the package, the benchmarks or the tests loads them by path."""
    from playpen.cli.run import load_trainer_class
    from playpen.training.catalog import TRAINERS, trainer_class
    example = REPO_ROOT / "examples" / "trl" / TRAINERS[name].example
    assert load_trainer_class(example) is trainer_class(name)
    assert f"playpen run {name} " in example.read_text()


def test_a_trainer_file_may_subclass_a_packaged_trainer(tmp_path):
    from playpen.cli.run import load_trainer_class
    from playpen.training.sft.trainer import SFTLoraTrainer
    trainer = tmp_path / "mine.py"
    trainer.write_text("from playpen.training.sft.trainer import SFTLoraTrainer\n\n\n"
                       "class Mine(SFTLoraTrainer):\n    kind = 'mine'\n")
    cls = load_trainer_class(trainer)
    assert cls.__name__ == "Mine" and issubclass(cls, SFTLoraTrainer)


def test_remote_teacher_without_key(tmp_path, monkeypatch):
    (tmp_path / "model_registry.json").write_text(json.dumps([
        {"model_name": "remote-teacher", "backend": "openai_compatible", "model_id": "scripted"}]))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    trainer = tmp_path / "t.py"
    trainer.write_text(TRAINER_OK)
    result = CliRunner().invoke(cli, ["run", str(trainer), "-l", "smol-135m", "-t", "remote-teacher"])
    assert result.exit_code == 2
    assert "openai_compatible.api_key" in result.output and "key.json.template" in result.output
    secret = "sk-very-secret-value"
    (tmp_path / "key.json").write_text(json.dumps({"openai_compatible": {"api_key": secret}}))
    result = CliRunner().invoke(cli, ["run", str(trainer), "-l", "smol-135m", "-t", "remote-teacher"])
    assert result.exit_code == 2
    assert "'openai_compatible.base_url' is missing" in result.output
    assert secret not in result.output
    assert not (tmp_path / "learn_called.json").exists()


def test_run_calls_learn_with_resolved_models(tiny_workspace):
    trainer = tiny_workspace / "t.py"
    trainer.write_text(TRAINER_OK)
    result = CliRunner().invoke(cli, ["run", str(trainer), "-l", "tiny-random", "-t", "programmatic",
                                      "-T", "0.7", "-L", "17", "--seed", "7", "-o", "out"])
    assert result.exit_code == 0, result.output
    called = json.loads((tiny_workspace / "learn_called.json").read_text())
    assert called["learner"] == "tiny-random"
    assert called["teacher"] == "programmatic"
    assert called["seed"] == 7 and called["output_dir"] == "out"
    assert called["gen_args"] == {"temperature": 0.7, "max_tokens": 17}



TRAINER_DRAWS = '''
import json, random
import numpy, torch
from playpen import BasePlayPen

class Draws(BasePlayPen):
    def learn(self, game_registry):
        draws = [random.random(), float(numpy.random.rand()), float(torch.rand(1))]
        open(f"draws-{self.seed}.json", "w").write(json.dumps(draws))
'''


def test_run_seeds_python_numpy_and_torch_as_transformers_set_seed_does(tiny_workspace):
    """`playpen run --seed S` seeds by transformers.set_seed (playpen's own seeding.py is gone):
    the trainer's first draws of python, numpy and torch are set_seed(S)'s."""
    import random

    import numpy
    import torch
    from transformers import set_seed
    (tiny_workspace / "draws.py").write_text(TRAINER_DRAWS)
    for seed in (7, 8):
        result = CliRunner().invoke(cli, ["run", "draws.py", "-l", "tiny-random", "--seed", str(seed)])
        assert result.exit_code == 0, result.output
    set_seed(7)
    expected = [random.random(), float(numpy.random.rand()), float(torch.rand(1))]
    assert json.loads((tiny_workspace / "draws-7.json").read_text()) == expected
    assert all(a != b for a, b in zip(expected, json.loads((tiny_workspace / "draws-8.json").read_text())))

TRAINER_WITH_CONFIG = '''
from dataclasses import dataclass, field
from playpen import BasePlayPen

@dataclass
class Options:
    max_steps: int = field(default=3, metadata={"help": "number of steps"})
    learning_rate: float = field(default=1e-4, metadata={"help": "step size"})
    games: list[str] = field(default_factory=lambda: ["taboo"], metadata={"help": "games to play"})
    use_lora: bool = field(default=True, metadata={"help": "train adapters"})

class WithConfig(BasePlayPen):
    """Records its config."""
    config_class = Options

    def learn(self, game_registry):
        import dataclasses, json
        open("config.json", "w").write(json.dumps(dataclasses.asdict(self.config)))
'''


def test_trainer_config_options(tiny_workspace):
    trainer = tiny_workspace / "t.py"
    trainer.write_text(TRAINER_WITH_CONFIG)
    result = CliRunner().invoke(cli, ["run", str(trainer), "--help"])
    assert result.exit_code == 0
    assert "--max-steps" in result.output and "number of steps" in result.output
    result = CliRunner().invoke(cli, ["run", str(trainer), "-l", "tiny-random", "--max-steps", "5",
                                      "--learning-rate=0.01", "--games", "taboo,wordle", "--no-use-lora"])
    assert result.exit_code == 0, result.output
    config = json.loads((tiny_workspace / "config.json").read_text())
    assert config == {"max_steps": 5, "learning_rate": 0.01, "games": ["taboo", "wordle"], "use_lora": False}
    result = CliRunner().invoke(cli, ["run", str(trainer), "-l", "tiny-random", "--max-stepz", "5"])
    assert result.exit_code == 2 and "unknown option '--max-stepz'" in result.output
    assert "--max-steps" in result.output
    result = CliRunner().invoke(cli, ["run", str(trainer), "-l", "tiny-random", "--max-steps", "five"])
    assert result.exit_code == 2 and "'five' is not a valid int" in result.output


def test_learner_must_be_local_hf(tiny_workspace):
    trainer = tiny_workspace / "t.py"
    trainer.write_text(TRAINER_OK)
    result = CliRunner().invoke(cli, ["run", str(trainer), "-l", "programmatic"])
    assert result.exit_code == 2 and "learner must be a huggingface_local model" in result.output


def test_console_script_subprocess(tmp_path):
    exe = Path(sys.executable).parent / "playpen"
    assert exe.exists(), "the playpen console script must be installed"
    done = subprocess.run([str(exe), "list", "models"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.returncode == 0 and "smol-135m" in done.stdout
    (tmp_path / "model_registry.json").write_text("{oops")
    done = subprocess.run([str(exe), "list", "models"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.startswith("playpen: error:") and "malformed JSON" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("command", [["run", "sft", "-l", "smol-135m"], ["eval", "-m", "smol-135m", "-g", "taboo"],
                                     ["tournament", "-m", "smol-135m", "-m", "programmatic", "-g", "taboo"]])
@pytest.mark.parametrize("engine, expected", [([], "needs --engine vllm"),
                                              (["--engine", "vllm", "--vllm-url", "http://127.0.0.1:9"],
                                               "a server computes in the dtype it was started with")])
def test_engine_dtype_is_for_vllm_in_this_process_only(tmp_path, monkeypatch, command, engine, expected):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, [*command, *engine, "--engine-dtype", "bfloat16"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("playpen: error: option --engine-dtype:") and expected in lines[0]


@pytest.mark.parametrize("chosen, temperature, native, expected", [
    ("auto", 1.0, True, "bfloat16"),    # sampled turns on bf16 hardware: bf16
    ("auto", 1.0, False, "float32"),    # no native bf16: the model's own
    ("auto", 0.0, True, "float32"),     # greedy turns (evaluation): the model's own
    ("float32", 1.0, True, "float32"),  # chosen: always
    ("bfloat16", 0.0, False, "bfloat16"),
])
def test_the_vllm_engine_dtype_follows_the_rule(chosen, temperature, native, expected):
    from playpen.inference.types import SamplingConfig
    from playpen.inference.vllm_engine import engine_dtype
    sampling = SamplingConfig(temperature=temperature, engine="vllm", engine_dtype=chosen)
    assert engine_dtype(sampling, "float32", native_bf16=native) == expected
    assert SamplingConfig.from_gen_args({"engine": "vllm", "engine_dtype": chosen}).engine_dtype == chosen
