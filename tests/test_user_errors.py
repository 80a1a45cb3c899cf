"""Every user mistake is one line on stderr and exit code 2, found before any model loads:
options out of range, folders that are files, registry entries whose folder, backend or
game is not there, a trainer file that raises, a malformed base_url, an adapter without
weights; `playpen dataset` refusing to overwrite and saying why nothing was written."""
import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from playpen.cli import cli

LORA_TRAINER = "sft"
HF_CONFIG = {"premade_chat_template": True, "eos_to_cull": "<\\|im_end\\|>"}
TRAINER = '''
from playpen import BasePlayPen

class Nothing(BasePlayPen):
    def learn(self, game_registry):
        open("learn_called", "w").write("yes")
'''


def one_line_error(result, expected):
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("playpen: error:")]
    assert len(errors) == 1 and expected in errors[0], result.output
    assert "Traceback" not in result.output


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def add_model(workspace, **entry):
    path = workspace / "model_registry.json"
    entries = json.loads(path.read_text()) if path.exists() else []
    path.write_text(json.dumps(entries + [entry]))


# ----------------------------------------------------------------------------- 4: options

@pytest.mark.parametrize("args, expected", [
    (["-T", "-1"], "option -T/--temperature: -1.0 is not valid; expected a number >= 0"),
    (["-L", "0"], "option -L/--max-tokens: 0 is not valid"),
    (["--batch-size", "0"], "option --batch-size: 0 is not valid; expected an integer >= 1"),
    (["--max-steps", "-3"], "option --max-steps: -3 is not valid"),
    (["--models-dir", "afile"], "option --models-dir: 'afile' is not valid; expected a folder (this is a file)"),
    (["--results-dir", "afile"], "option --results-dir: 'afile' is not valid; expected a folder"),
    (["-o", "afile"], "option -o/--output-dir: 'afile' is a file, not a folder"),
])
def test_sft_options_are_checked_before_any_model_loads(tiny_workspace, monkeypatch, args, expected):
    (tiny_workspace / "afile").write_text("not a folder")
    from playpen import models
    monkeypatch.setattr(models, "load_model_by_name", lambda *a, **k: pytest.fail("a model was loaded"))
    result = invoke("run", LORA_TRAINER, "-l", "tiny-random", *args)
    one_line_error(result, expected)
    assert not (tiny_workspace / "models").exists()


def test_batch_size_0_through_the_real_command(tiny_workspace):
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    done = subprocess.run([sys.executable, "-m", "playpen", "run", str(LORA_TRAINER), "-l", "tiny-random",
                           "--batch-size", "0"], cwd=tiny_workspace, capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 2
    assert done.stderr.strip() == ("playpen: error: option --batch-size: 0 is not valid; "
                                   "expected an integer >= 1")


@pytest.mark.parametrize("args, expected", [
    (["-T", "-0.5"], "option -T/--temperature: -0.5 is not valid"),
    (["-r", "afile"], "option -r/--results-dir: 'afile' is a file, not a folder"),
])
def test_eval_options_are_checked(tmp_path, monkeypatch, args, expected):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    one_line_error(invoke("eval", "-m", "programmatic", "-g", "taboo", *args), expected)


# ----------------------------------------------------------------------------- 7: one line, not a traceback

def test_a_registered_folder_that_does_not_exist(tiny_workspace, monkeypatch):
    """Once a ~100-line traceback after 8 s with a misleading "Repo id must be in the form"."""
    add_model(tiny_workspace, model_name="gone", backend="huggingface_local",
              huggingface_id=str(tiny_workspace / "no" / "such-folder"), model_config=HF_CONFIG)
    add_model(tiny_workspace, model_name="relative", backend="huggingface_local",
              huggingface_id="./models/moved", model_config=HF_CONFIG)
    (tiny_workspace / "t.py").write_text(TRAINER)
    one_line_error(invoke("eval", "-m", "gone", "-g", "taboo"),
                   f"model 'gone' ({tiny_workspace / 'model_registry.json'}): huggingface_id "
                   f"'{tiny_workspace / 'no' / 'such-folder'}' is no folder")
    one_line_error(invoke("run", "t.py", "-l", "relative"), "huggingface_id")
    assert not (tiny_workspace / "learn_called").exists()


def test_an_unknown_backend_is_named_with_close_matches(tmp_path, monkeypatch):
    """The message once asked for credentials instead."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    add_model(tmp_path, model_name="typo", backend="openai_compatibel", model_id="m")
    result = invoke("eval", "-m", "typo", "-g", "taboo")
    one_line_error(result, "model 'typo'")
    assert "unknown backend 'openai_compatibel'. Did you mean: openai_compatible" in result.output
    assert "credentials" not in result.output


def test_a_game_path_that_does_not_exist(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "game_registry.json").write_text(json.dumps([{"game_name": "mine", "game_path": "games/mine"}]))
    one_line_error(invoke("list", "games"),
                   f"game_registry.json: entry 0 ('mine'): game_path '{tmp_path / 'games' / 'mine'}' is no folder")
    (tmp_path / "games" / "mine").mkdir(parents=True)
    one_line_error(invoke("eval", "-m", "programmatic", "-g", "mine"), "is not a game folder (no clemgame.json)")


def test_a_trainer_file_that_raises_at_import_shows_its_own_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "helper.py").write_text("def settings():\n    return {}['lr']\n")
    (tmp_path / "t.py").write_text("import helper\n\nLR = helper.settings()\n")
    one_line_error(invoke("run", "t.py", "-l", "smol-135m"),
                   "t.py:3: KeyError while importing the trainer file: 'lr'")
    (tmp_path / "t.py").write_text("x = 1\nraise ValueError('set MY_VAR first')\n")
    one_line_error(invoke("run", "t.py", "-l", "smol-135m"),
                   "t.py:2: ValueError while importing the trainer file: set MY_VAR first")


def test_a_base_url_that_is_not_a_url(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    add_model(tmp_path, model_name="remote", backend="openai_compatible", model_id="m")
    secret = "sk-very-secret"
    (tmp_path / "key.json").write_text(json.dumps({"openai_compatible": {"api_key": secret,
                                                                         "base_url": "not a url"}}))
    result = invoke("eval", "-m", "remote", "-g", "taboo")
    one_line_error(result, "field 'openai_compatible.base_url' is not an http(s) URL")
    assert secret not in result.output and not (tmp_path / "results").exists()


def test_an_adapter_folder_without_weights(tiny_workspace):
    adapter = tiny_workspace / "half-copied"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "x", "peft_type": "LORA"}))
    one_line_error(invoke("eval", "-m", "tiny-random", "--adapter", adapter, "-g", "taboo"),
                   "has adapter_config.json but no weights")
    add_model(tiny_workspace, model_name="registered-adapter", backend="huggingface_local",
              huggingface_id=json.loads((tiny_workspace / "model_registry.json").read_text())[0]["huggingface_id"],
              model_config={**HF_CONFIG, "peft_model": str(adapter)})
    one_line_error(invoke("eval", "-m", "registered-adapter", "-g", "taboo"), "but no weights")


@pytest.mark.parametrize("args, expected", [
    (["dataset", "results", "-o", "adir"], "Invalid value for '-o' / '--output': File 'adir' is a directory. "
                                           "(see `playpen dataset --help`)"),
    (["eval", "-m", "programmatic", "-T", "warm"], "'warm' is not a valid float"),
    (["list", "everything"], "'everything' is not one of 'games', 'models', 'backends'"),
    (["eval"], "Missing option '-m' / '--model'"),
])
def test_bad_options_of_a_command_are_one_line_too(tmp_path, monkeypatch, args, expected):
    """click's own errors (usage, Try '--help', Error) were three lines."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "adir").mkdir()
    one_line_error(invoke(*args), expected)


# ----------------------------------------------------------------------------- 9: playpen dataset

@pytest.fixture(scope="module")
def programmatic_results(tmp_path_factory):
    root = tmp_path_factory.mktemp("programmatic")
    cwd = os.getcwd()
    os.chdir(root)
    try:
        result = CliRunner().invoke(cli, ["eval", "-m", "programmatic", "-g", "taboo", "-n", "1"])
        assert result.exit_code == 0, result.output
    finally:
        os.chdir(cwd)
    return root / "results" / "programmatic"


def test_dataset_says_why_nothing_was_written_and_never_overwrites(tmp_path, programmatic_results):
    out = tmp_path / "episodes.jsonl"
    result = invoke("dataset", programmatic_results, "-o", out)
    assert result.exit_code == 0, result.output
    assert "wrote 0 records" in result.output and "only programmatic players" in result.output
    assert "--include-programmatic" in result.output
    out.write_text("precious\n")
    one_line_error(invoke("dataset", programmatic_results, "-o", out, "--include-programmatic"),
                   "exists: pass --overwrite")
    assert out.read_text() == "precious\n"
    result = invoke("dataset", programmatic_results, "-o", out, "--include-programmatic", "--overwrite")
    assert result.exit_code == 0 and len(out.read_text().splitlines()) == 6  # 3 episodes x 2 players
