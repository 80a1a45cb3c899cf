"""Every user mistake is one line on stderr and exit code 2, found before any model loads:
options out of range, folders that are files, registry entries whose folder, backend or
game is not there, a trainer file that raises, a malformed base_url, an adapter without
weights; `playpen dataset` refusing to overwrite and saying why nothing was written."""
import json
import os
import subprocess
import sys

from pathlib import Path

import pytest
from click.testing import CliRunner

from playpen import BasePlayPen, RunConfig
from playpen.cli import cli
from playpen.errors import DatasetError
from playpen.training.common.lifecycle import TrainingRun

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
    (["--models-dir", "afile"], "option --models-dir: 'afile' is not valid; expected a folder (this or a folder "
                                "above it is a file)"),
    (["--models-dir", "afile/x"], "option --models-dir: 'afile/x' is not valid; expected a folder (this or a "
                                  "folder above it is a file)"),
    (["--results-dir", "afile/deeper/r"], "option --results-dir: 'afile/deeper/r' is not valid"),
    (["--results-dir", "afile"], "option --results-dir: 'afile' is not valid; expected a folder"),
    (["-o", "afile"], "option -o/--output-dir: 'afile' is a file, not a folder"),
    (["-o", "afile/records"], "option -o/--output-dir: 'afile/records' is under 'afile', a file, not a folder"),
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
    (["-r", "afile/r"], "option -r/--results-dir: 'afile/r' is under 'afile', a file, not a folder"),
    (["--name", "../../elsewhere"], "option --name: '../../elsewhere' is not valid; expected a folder name"),
    (["--name", ".."], "option --name: '..' is not valid"),
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


# ----------------------------------------------------------------------------- issue 30: more user mistakes

def test_a_run_folder_with_checkpoints_names_models_dir(tmp_path, monkeypatch):
    """A second game's run in the same workspace meets the first one's checkpoints."""
    monkeypatch.chdir(tmp_path)
    from playpen.errors import PlaypenError
    from playpen.training.common.config import RunConfig
    from playpen.training.common.lifecycle import TrainingRun
    run_dir = tmp_path / "models" / "sft+lora" / "m"
    (run_dir / "checkpoint-2").mkdir(parents=True)
    (run_dir / "checkpoint-2" / "trainer_state.json").write_text('{"global_step": 2}')
    trainer = type("T", (), {"config": RunConfig(evaluate=False)})()
    with pytest.raises(PlaypenError, match="already holds checkpoints: pass --resume to continue, --overwrite to "
                                           "start over, or --models-dir DIR for a run of its own"):
        TrainingRun(trainer, run_dir, ["taboo"], "")


def test_list_games_columns_fit_long_names(tmp_path, monkeypatch):
    import shutil
    from rollout_helpers import TOYGAMES_DIR
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "games" / "a_very_long_clembench_game_name_v2"
    shutil.copytree(TOYGAMES_DIR / "sayword", folder)
    spec = json.loads((folder / "clemgame.json").read_text())
    (folder / "clemgame.json").write_text(json.dumps({**spec, "game_name": folder.name}))
    (tmp_path / "game_registry.json").write_text(json.dumps([{"benchmark_path": "games"}]))
    result = invoke("list", "games")
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines()[1:] if line.startswith("  ") and not line.startswith("    ")]
    mine = next(line for line in rows if folder.name in line)
    taboo = next(line for line in rows if line.split()[0] == "taboo")
    assert mine.index(" 1p ") == taboo.index(" 2p ")  # the players column stays one column
    assert mine.index("games:") == taboo.index("playpen:taboo")


@pytest.mark.parametrize("damage, expected", [
    (lambda d: (d / "config.json").write_text('{"model_type": "llama",'), "damaged/config.json:1:24: not valid JSON"),
    (lambda d: (d / "config.json").unlink(), "has no config.json"),
    (lambda d: [p.unlink() for p in d.glob("*.safetensors")], "has config.json but no weights"),
    (lambda d: [(d / n).unlink() for n in ("tokenizer.json", "vocab.json") if (d / n).exists()], "has no tokenizer"),
    (lambda d: (d / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})),
     "model.safetensors.index.json names 2 missing shard(s)"),
])
def test_a_damaged_local_model_folder_is_one_line(tiny_workspace, tiny_model_dir, damage, expected):
    """A config.json that was not valid JSON once gave a 107-line transformers traceback."""
    import shutil
    folder = tiny_workspace / "damaged"
    shutil.copytree(tiny_model_dir, folder)
    damage(folder)
    add_model(tiny_workspace, model_name="damaged", backend="huggingface_local", huggingface_id=str(folder),
              model_config=HF_CONFIG)
    result = invoke("eval", "-m", "damaged", "-g", "taboo")
    one_line_error(result, f"model 'damaged' ({tiny_workspace / 'model_registry.json'}): ")
    assert expected in result.output
    (tiny_workspace / "t.py").write_text(TRAINER)
    one_line_error(invoke("run", "t.py", "-l", "damaged"), expected)


def test_a_trainer_file_without_run_suggests_playpen_run(tmp_path, monkeypatch):
    """Upstream playpen's TL;DR form: `playpen examples/trl/x.py -l M`."""
    monkeypatch.chdir(tmp_path)
    result = invoke("examples/trl/sft_trainer_lora.py", "-l", "smol-135m")
    one_line_error(result, "no command 'examples/trl/sft_trainer_lora.py': did you mean "
                           "`playpen run examples/trl/sft_trainer_lora.py`?")
    one_line_error(invoke("evl", "-m", "x"), "No such command 'evl'")


# ----------------------------------------------------------------------------- every command, wrong types and full disks

REMOTE = {"model_name": "m", "backend": "openai_compatible", "model_id": "served"}


# key values no path or message can contain by chance (pytest's tmp folders are numbered: pytest-123/)
SECRET, SECRET_INT = "sk-never-printed-Zq8v", 918273645


@pytest.mark.parametrize("files, args, expected", [
    ({"model_registry.json": [{"model_name": "m", "backend": "huggingface_local", "huggingface_id": 5,
                               "model_config": HF_CONFIG}]},
     ["eval", "-m", "m", "-g", "taboo"], "model 'm': 'huggingface_id' is 5, expected a string"),
    ({"model_registry.json": [{"model_name": "m", "backend": "huggingface_local", "huggingface_id": "a/b",
                               "model_config": {**HF_CONFIG, "peft_model": 3}}]},
     ["eval", "-m", "m", "-g", "taboo"], "'model_config.peft_model' is 3, expected a string"),
    ({"model_registry.json": [{"model_name": "m", "backend": "huggingface_local", "huggingface_id": "a/b",
                               "model_config": ["premade_chat_template"]}]},
     ["list", "models"], "'model_config' is ['premade_chat_template'], expected an object"),
    ({"model_registry.json": [{**REMOTE, "model_id": 7}]}, ["eval", "-m", "m"], "'model_id' is 7, expected a string"),
    ({"model_registry.json": [REMOTE], "key.json": {"openai_compatible": {"api_key": SECRET_INT, "base_url": "http://x/v1"}}},
     ["eval", "-m", "m", "-g", "taboo"], "field 'openai_compatible.api_key' is a int, expected a string"),
    ({"model_registry.json": [REMOTE], "key.json": {"openai_compatible": SECRET}},
     ["eval", "-m", "m", "-g", "taboo"], "has no 'openai_compatible' entry"),
    ({"game_registry.json": [{"benchmark_path": 3}]}, ["list", "games"],
     "entry 0: 'benchmark_path' is 3, expected a folder (a non-empty string)"),
    ({"game_registry.json": [{"game_name": "mine", "game_path": ["games"]}]}, ["eval", "-m", "programmatic"],
     "entry 0: 'game_path' is ['games'], expected a folder"),
    ({"game_registry.json": [{"game_name": 3, "game_path": "games"}]}, ["check", "taboo"],
     "entry 0: 'game_name' is 3, expected a name"),
])
def test_wrong_types_in_registries_and_key_json_are_one_line(tmp_path, monkeypatch, files, args, expected):
    """Each of these once ended in a TypeError or AttributeError traceback (or passed unchecked)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    for name, data in files.items():
        (tmp_path / name).write_text(json.dumps(data))
    result = invoke(*args)
    if args[0] == "check":  # the checker reports it as its first check
        assert result.exit_code == 1 and expected in result.output and "Traceback" not in result.output
    else:
        one_line_error(result, expected)
    assert str(SECRET_INT) not in result.output and SECRET not in result.output  # never a key's value


@pytest.mark.parametrize("log, expected", [
    ('{"event": "train_step", "step": "x"}\n', "playpen-log.jsonl:1: a train_step record's 'step' is 'x', expected"),
    ('[1, 2]\n{"event": "train_step", "step": 1}\n', "playpen-log.jsonl:1: expected a JSON object per line, got list"),
])
def test_plot_of_a_malformed_log_is_one_line(tmp_path, log, expected):
    (tmp_path / "playpen-log.jsonl").write_text(log)
    one_line_error(invoke("plot", tmp_path), expected)
    assert not (tmp_path / "learning-curve.png").exists()


def test_dataset_skips_an_episode_whose_events_are_malformed(tmp_path):
    episode = tmp_path / "results" / "m" / "g" / "e" / "instance_00000"
    episode.mkdir(parents=True)
    (episode / "interactions.json").write_text(json.dumps({
        "players": {"GM": "x", "Player 1": "A: m"}, "turns": [[{"from": "Player 1", "to": "GM", "action": 5}]]}))
    for extra in ([], ["--pairs"]):
        result = invoke("dataset", tmp_path / "results", "-o", tmp_path / f"o{len(extra)}.jsonl", *extra)
        assert "Traceback" not in result.output and result.exit_code in (0, 2), result.output
    result = invoke("dataset", tmp_path / "results", "-o", tmp_path / "o.jsonl", "--overwrite")
    assert result.exit_code == 0 and "turn 0 is not a list of events" in result.output


def _full_disk(monkeypatch):
    """Every atomic write (and mkdtemp-free temp file) fails as on a full disk."""
    import errno
    import tempfile

    def enospc(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(tempfile, "mkstemp", enospc)


def test_a_full_disk_is_one_line_and_keeps_what_was_written(tmp_path, monkeypatch, programmatic_results):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "episodes.jsonl"
    out.write_text("precious\n")
    _full_disk(monkeypatch)
    one_line_error(invoke("dataset", programmatic_results, "-o", out, "--include-programmatic", "--overwrite"),
                   f"cannot write {out}: No space left on device")
    assert out.read_text() == "precious\n" and [p.name for p in tmp_path.iterdir()] == ["episodes.jsonl"]
    one_line_error(invoke("setup", "--no-verify"),
                   f"cannot write {tmp_path / 'game_registry.json'}: No space left on device")
    one_line_error(invoke("eval", "-m", "programmatic", "-g", "taboo", "-n", "1"), "No space left on device")


def test_a_folder_without_permission_is_one_line(tmp_path, monkeypatch):
    """Simulated (the tests may run as root, for whom chmod does not bite)."""
    import errno
    import pathlib
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model_registry.json").write_text("[]")
    real_read_text = pathlib.Path.read_text

    def denied(self, *args, **kwargs):
        if self.name == "model_registry.json":
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real_read_text(self, *args, **kwargs)
    monkeypatch.setattr(pathlib.Path, "read_text", denied)
    one_line_error(invoke("list", "models"), "model_registry.json: cannot read: Permission denied")
    monkeypatch.setattr(pathlib.Path, "read_text", real_read_text)
    real_mkdir = pathlib.Path.mkdir

    def read_only(self, *args, **kwargs):
        if "results" in self.parts:
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real_mkdir(self, *args, **kwargs)
    monkeypatch.setattr(pathlib.Path, "mkdir", read_only)
    result = invoke("eval", "-m", "programmatic", "-g", "taboo", "-n", "1")
    one_line_error(result, "Permission denied")


@pytest.mark.parametrize("name", ["game_registry.json", "model_registry.json", "key.json"])
def test_a_registry_file_that_is_not_utf8_is_one_line(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    if name == "key.json":
        add_model(tmp_path, **REMOTE)
    (tmp_path / name).write_bytes(b"\xff\xfe[")  # UTF-16, as some editors save
    args = {"game_registry.json": ["list", "games"], "model_registry.json": ["list", "models"],
            "key.json": ["eval", "-m", "m", "-g", "taboo"]}[name]
    one_line_error(invoke(*args), f"{tmp_path / name}: not UTF-8 text (byte 0)")


def test_game_specs_with_wrong_types_are_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    game = tmp_path / "games" / "g"
    (game / "in").mkdir(parents=True)
    (game / "in" / "instances.json").write_text(json.dumps({"experiments": []}))
    (tmp_path / "game_registry.json").write_text(json.dumps([{"benchmark_path": "games"}]))
    (game / "clemgame.json").write_text(json.dumps([{"game_name": 5, "players": 1}]))
    one_line_error(invoke("list", "games"), "g/clemgame.json: every spec needs a 'game_name' (a non-empty string)")
    (game / "clemgame.json").write_text(json.dumps({"game_name": "gg", "players": "two", "description": "d"}))
    one_line_error(invoke("eval", "-m", "programmatic", "-g", "gg"),
                   "game 'gg' (" + str(game / "clemgame.json") + "): 'players' is 'two', expected an integer >= 1")


def test_an_output_under_a_file_is_one_line(tmp_path, programmatic_results):
    (tmp_path / "afile").write_text("x")
    one_line_error(invoke("dataset", programmatic_results, "-o", tmp_path / "afile" / "o.jsonl"),
                   f"cannot write {tmp_path / 'afile' / 'o.jsonl'}: {tmp_path / 'afile'} is a file, not a folder")
    assert (tmp_path / "afile").read_text() == "x"


def test_a_half_written_scores_file_in_the_run_folder_is_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert invoke("eval", "-m", "programmatic", "-g", "taboo", "-n", "1").exit_code == 0
    scores = next((tmp_path / "results").rglob("scores.json"))
    scores.write_text('{"episode scores": {')
    one_line_error(invoke("eval", "-m", "programmatic", "-g", "wordle", "-n", "1"),
                   f"{scores.relative_to(tmp_path)}: not a scores file (JSONDecodeError")


# ----------------------------------------------------------------------------- issue 40: tried as a new user would

def test_a_run_refused_for_an_unknown_game_leaves_nothing_behind(tiny_workspace):
    """`playpen run sft --games nosuchgame` once left an empty run folder with its lock file
    and a clembench.log: a refused run writes nothing."""
    before = {p.relative_to(tiny_workspace) for p in tiny_workspace.rglob("*")}
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    done = subprocess.run([sys.executable, "-m", "playpen", "run", LORA_TRAINER, "-l", "tiny-random", "--games",
                           "nosuchgame"], cwd=tiny_workspace, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("playpen: error: unknown game 'nosuchgame'.") and "Traceback" not in done.stderr
    after = {p.relative_to(tiny_workspace) for p in tiny_workspace.rglob("*")}
    assert after == before, sorted(map(str, after - before))


class Refusing(BasePlayPen):
    """Opens its run, then finds a user mistake before it trains (as SFT does when the
    demonstrations hold nothing to learn)."""

    config_class = RunConfig

    def learn(self, game_registry):
        TrainingRun(self, Path(self.config.models_dir) / "refusing" / "m", self.config.game_list, "")
        raise DatasetError("nothing to learn")


def test_a_run_that_refuses_after_opening_its_folder_leaves_nothing_behind(tiny_workspace, monkeypatch):
    """A mistake found after the run folder was locked (the data, not the options): the lock
    file and the folders the run created go again."""
    from playpen.cli import run as run_command
    monkeypatch.setattr(run_command, "trainer_class", lambda trainer: Refusing)
    before = {p.relative_to(tiny_workspace) for p in tiny_workspace.rglob("*")}
    one_line_error(invoke("run", "refusing", "-l", "tiny-random", "--games", "taboo", "--no-evaluate"),
                   "nothing to learn")
    created = {p.relative_to(tiny_workspace) for p in tiny_workspace.rglob("*")} - before
    assert not [p for p in created if p.parts[0] == "models"], sorted(map(str, created))
