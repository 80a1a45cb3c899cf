"""Runs that never mix, lose or silently reuse data: the run-folder lock (two real runs),
SIGTERM and Ctrl-C (real signals to real processes: a checkpoint, then exit 143 / 130),
checkpoint rotation killed half-way, a save killed half-way, a new --save-steps on
--resume, and demonstration sets that are complete or rebuilt."""
import io
import json
import logging
import os
import runpy
import selectors
import shutil
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

import pytest

from playpen.training.common import lifecycle as training
from playpen.training.sft import demonstrations as sft

LORA_TRAINER = "sft"
RUN_DIR = Path("models") / "sft+lora" / "tiny-random"
# many cheap steps and no save but the one a signal asks for
LONG_RUN = ["--max-steps", "100000", "--batch-size", "1", "--max-length", "300", "--save-steps", "100000",
            "--lora-r", "2", "--no-evaluate"]


@pytest.fixture(scope="module")
def demos(tmp_path_factory):
    """Programmatic referencegame episodes on the training instances (1 per experiment)."""
    root = tmp_path_factory.mktemp("demos")
    cwd = os.getcwd()
    os.chdir(root)
    try:
        return sft.play_demonstrations(["referencegame"], root / "demonstrations", max_instances=1)
    finally:
        os.chdir(cwd)


def start_playpen(workspace, *args):
    """`python -m playpen ARGS` in workspace, as a child forked from this test process.

    A new interpreter paid the imports of torch, transformers, peft and trl again, seven times
    in this file (a stopped `playpen run sleeper.py`: 10.3 s that way, 0.9 s forked, on a busy
    2-core machine); the fork has them already. It is a process of its own all the same: its
    own PID, lock and run folder, real signals, its exit code from playpen's own entry module
    (``playpen/__main__.py``), its stdout and stderr through pipes. CUDA does not survive a
    fork, and neither does an OpenMP thread pool (a forked fsp run with two torch threads hung
    in its first parallel region): once this process has used CUDA, or runs more than one torch
    thread (`pytest -n 0` without `OMP_NUM_THREADS=1`; `make test`'s workers run one), a new
    interpreter."""
    import torch
    args = [str(a) for a in args]
    if torch.cuda.is_initialized() or torch.get_num_threads() > 1:
        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        return subprocess.Popen([sys.executable, "-m", "playpen", *args], cwd=workspace, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=foreground)
    return ForkedPlaypen(workspace, args)


def foreground():
    """The child starts as a shell's foreground job does: Python's own Ctrl-C handler, SIGTERM
    at its default. A suite started as a background job (`make test &`; a non-interactive
    shell starts those with SIGINT ignored) once gave the child an ignored SIGINT, inherited
    across exec (Python then installs no Ctrl-C handler): it slept through its Ctrl-C and exited 0."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


class ForkedPlaypen:
    """The part of subprocess.Popen the tests use: pid, poll, send_signal, kill, communicate."""

    def __init__(self, workspace, args):
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        self.returncode = None
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns into pytest
            code = 1
            try:
                os.close(out_r), os.close(err_r)
                os.dup2(out_w, 1), os.dup2(err_w, 2)
                sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True)
                sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True)
                # pytest's log capture out: what the run logs goes where it goes in a new process
                logging.root.handlers[:] = [h for h in logging.root.handlers
                                            if not type(h).__module__.startswith("_pytest")]
                os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
                os.chdir(workspace)
                foreground()
                sys.argv = ["playpen", *args]
                runpy.run_module("playpen", run_name="__main__", alter_sys=True)
                code = 0
            except SystemExit as stop:
                code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush(), sys.stderr.flush()
                os._exit(code)
        os.close(out_w), os.close(err_w)
        self._pipes = {out_r: bytearray(), err_r: bytearray()}
        self._out, self._err = out_r, err_r

    def poll(self):
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def send_signal(self, signum):
        if self.poll() is None:
            os.kill(self.pid, signum)

    def kill(self):
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout=None):
        """Both pipes read to their end, then the exit status (subprocess.TimeoutExpired past timeout)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            for fd in self._pipes:
                selector.register(fd, selectors.EVENT_READ)
            while selector.get_map():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(["playpen"], timeout)
                for key, _ in selector.select(left):
                    chunk = os.read(key.fd, 65536)
                    if chunk:
                        self._pipes[key.fd].extend(chunk)
                    else:
                        selector.unregister(key.fd)
                        os.close(key.fd)
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(["playpen"], timeout)
            time.sleep(0.05)
        return self._pipes[self._out].decode(), self._pipes[self._err].decode()


def wait_for(condition, process, timeout=240, what="the condition"):
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            out, err = process.communicate()
            pytest.fail(f"process ended (rc {process.returncode}) before {what}:\n{out[-2000:]}\n{err[-3000:]}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)


def logged_steps(workspace) -> int:
    log = workspace / RUN_DIR / "playpen-log.jsonl"
    return log.read_text().count('"train_step"') if log.exists() else 0


# ----------------------------------------------------------------------------- lock, signals

def test_a_second_run_into_a_used_run_folder_stops_naming_the_holder(tiny_workspace, demos):
    """Two runs into one folder once mixed their checkpoints and logs. A Ctrl-C then stops
    the holder after saving, with exit code 130."""
    first = start_playpen(tiny_workspace, "run", LORA_TRAINER, "-l", "tiny-random", "--records", demos, *LONG_RUN)
    wait_for(lambda: logged_steps(tiny_workspace) >= 1, first, what="the first run's first step")
    # the refused run in this process (the lock is per process: the holder is the child); a
    # second interpreter would add only its start-up
    from click.testing import CliRunner
    from playpen.cli import cli
    second = CliRunner().invoke(cli, ["run", LORA_TRAINER, "-l", "tiny-random", "--records", str(demos), *LONG_RUN])
    assert second.exit_code == 2, second.output[-3000:]
    error = [line for line in second.stderr.splitlines() if line.startswith("playpen: error:")]
    assert len(error) == 1 and f"(PID {first.pid}: " in error[0] and "is in use by another run" in error[0]
    assert "run sft -l tiny-random" in error[0] and "Traceback" not in second.stderr
    assert first.poll() is None  # the holder goes on
    first.send_signal(signal.SIGINT)
    out, err = first.communicate(timeout=300)
    assert first.returncode == 130, err[-3000:]
    assert "playpen: interrupted by SIGINT" in err
    run_dir = tiny_workspace / RUN_DIR
    assert training.latest_checkpoint(run_dir) is not None
    assert not (run_dir / ".playpen.lock").exists()
    summary = json.loads((run_dir / "playpen-run.json").read_text())
    assert summary["interrupted"] is True and summary["signal"] == "SIGINT"


def test_sigterm_finishes_the_step_saves_and_exits_143(tiny_workspace, demos):
    """SIGTERM (a timeout, a scheduler, docker stop) once killed the run with no save."""
    from click.testing import CliRunner
    from playpen.cli import cli
    run = start_playpen(tiny_workspace, "run", LORA_TRAINER, "-l", "tiny-random", "--records", demos, *LONG_RUN)
    wait_for(lambda: logged_steps(tiny_workspace) >= 2, run, what="two steps")
    run.send_signal(signal.SIGTERM)
    out, err = run.communicate(timeout=300)
    assert run.returncode == 143, err[-3000:]
    assert "SIGTERM: saving a checkpoint after this step" in out and "continue with --resume" in out
    assert "playpen: interrupted by SIGTERM" in err
    run_dir = tiny_workspace / RUN_DIR
    last = training.latest_checkpoint(run_dir)
    assert last is not None and (last / "adapter_model.safetensors").exists()
    step = training.checkpoint_step(last)
    assert step >= 2 and step == logged_steps(tiny_workspace)
    # --resume continues from it
    result = CliRunner().invoke(cli, ["run", str(LORA_TRAINER), "-l", "tiny-random", "--records", str(demos),
                                      *LONG_RUN[:1], str(step + 1), *LONG_RUN[2:], "--resume"])
    assert result.exit_code == 0, result.output
    assert training.latest_checkpoint(run_dir).name == f"checkpoint-{step + 1}"


SLEEPER = '''
import time
from pathlib import Path
from playpen import BasePlayPen

class Sleeper(BasePlayPen):
    def learn(self, game_registry):
        Path("started").write_text("yes")
        time.sleep(120)
'''


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_command_exits_128_plus_the_signal(tiny_workspace, signum, code):
    """A run stopped by Ctrl-C once exited 0 (click's "Aborted!" 1 outside training), so
    `playpen run ... && playpen eval ...` carried on."""
    (tiny_workspace / "sleeper.py").write_text(SLEEPER)
    process = start_playpen(tiny_workspace, "run", "sleeper.py", "-l", "tiny-random")
    wait_for(lambda: (tiny_workspace / "started").exists(), process, what="learn()")
    process.send_signal(signum)
    out, err = process.communicate(timeout=180)  # a loaded CI machine tears torch down slowly
    assert process.returncode == code, err[-2000:]
    assert f"playpen: interrupted by {signal.Signals(signum).name}" in err and "Traceback" not in err


# ----------------------------------------------------------------------------- checkpoints

def load_trainer(**config):
    from playpen.cli.run import trainer_class
    from playpen.models import load_model_by_name
    cls = trainer_class(LORA_TRAINER)
    learner = load_model_by_name("tiny-random", gen_args=dict(temperature=0.0, max_tokens=6), role="learner")
    base = dict(batch_size=2, max_length=300, lora_r=2, evaluate=False, save_steps=1, save_total_limit=2)
    return cls(learner, config=cls.config_class(**{**base, **config}), progress=False)


def test_rotation_killed_half_way_never_loses_a_complete_checkpoint(tiny_workspace, demos, monkeypatch):
    """A SIGTERM during rotation once left a half-deleted checkpoint that --resume kept
    while rotation deleted the two intact ones."""
    real_rmtree = shutil.rmtree

    def killed_half_way(path, *args, **kwargs):
        if "checkpoint-" not in str(path) or not Path(path).exists():
            return real_rmtree(path, *args, **kwargs)
        files = sorted(p for p in Path(path).rglob("*") if p.is_file())
        if files:
            files[0].unlink()  # one file gone, then the process dies
        raise KeyboardInterrupt

    run_dir = tiny_workspace / RUN_DIR
    load_trainer(records=str(demos), max_steps=2).learn(None)
    assert [p.name for p in training.checkpoints(run_dir)] == ["checkpoint-1", "checkpoint-2"]
    monkeypatch.setattr(shutil, "rmtree", killed_half_way)
    with pytest.raises(KeyboardInterrupt):  # the save of step 3 rotates checkpoint-1 out
        load_trainer(records=str(demos), max_steps=3, resume=True).learn(None)
    monkeypatch.setattr(shutil, "rmtree", real_rmtree)
    names = sorted(p.name for p in run_dir.iterdir() if "checkpoint" in p.name)
    assert "checkpoint-1" not in names  # never a half-deleted checkpoint-N
    assert [p.name for p in training.checkpoints(run_dir)] == ["checkpoint-2", "checkpoint-3"]
    for ckpt in training.checkpoints(run_dir):
        assert (ckpt / "adapter_model.safetensors").exists() and (ckpt / "adapter_config.json").exists()
    load_trainer(records=str(demos), max_steps=5, resume=True).learn(None)
    assert sorted(p.name for p in run_dir.iterdir() if "checkpoint" in p.name) == ["checkpoint-4", "checkpoint-5"]


def test_a_save_killed_half_way_is_never_kept_or_resumed(tiny_workspace, demos, monkeypatch, capsys):
    from transformers import TrainerState
    real_save = TrainerState.save_to_json

    def killed_before_the_state(self, path):
        if self.global_step == 3:
            raise KeyboardInterrupt  # weights written, trainer_state.json not: incomplete
        return real_save(self, path)

    run_dir = tiny_workspace / RUN_DIR
    monkeypatch.setattr(TrainerState, "save_to_json", killed_before_the_state)
    with pytest.raises(KeyboardInterrupt):
        load_trainer(records=str(demos), max_steps=4).learn(None)
    monkeypatch.setattr(TrainerState, "save_to_json", real_save)
    assert (run_dir / "checkpoint-3" / "adapter_model.safetensors").exists()
    assert [p.name for p in training.checkpoints(run_dir)] == ["checkpoint-1", "checkpoint-2"]
    capsys.readouterr()
    trainer = load_trainer(records=str(demos), max_steps=4, resume=True)
    trainer.learn(None)
    assert "removed what an interrupted save left" in capsys.readouterr().out
    state = json.loads((run_dir / "checkpoint-3" / "trainer_state.json").read_text())
    assert state["global_step"] == 3  # saved again by the resumed run, from checkpoint-2
    assert [p.name for p in training.checkpoints(run_dir)] == ["checkpoint-3", "checkpoint-4"]


def test_resume_applies_a_new_save_steps_and_says_so(tiny_workspace, demos, capsys):
    """On --resume, the checkpoint's save interval once won silently over --save-steps."""
    run_dir = tiny_workspace / RUN_DIR
    load_trainer(records=str(demos), max_steps=2, save_steps=2, save_total_limit=10).learn(None)
    capsys.readouterr()
    load_trainer(records=str(demos), max_steps=4, save_steps=1, save_total_limit=10, resume=True).learn(None)
    assert "--resume: saving every 1 steps as asked (the checkpoint saved every 2)" in capsys.readouterr().out
    assert [p.name for p in training.checkpoints(run_dir)] == ["checkpoint-2", "checkpoint-3", "checkpoint-4"]


def test_the_lock_is_taken_before_the_refusals_and_released(tiny_workspace, demos):
    from playpen.errors import RunLockedError
    from playpen.files import FolderLock
    run_dir = tiny_workspace / RUN_DIR
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from playpen.files import FolderLock; "
        f"lock = FolderLock({str(run_dir)!r}); assert lock.acquire(); print('held', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunLockedError, match=f"PID {holder.pid}: "):
            load_trainer(records=str(demos), max_steps=1).learn(None)  # refused before any training
    finally:
        holder.kill()
        holder.wait()
    lock = FolderLock(run_dir)
    assert lock.acquire()  # the OS released the dead holder's lock
    lock.release()
    assert not (run_dir / ".playpen.lock").exists()


# ----------------------------------------------------------------------------- demonstrations

def test_an_interrupted_demonstration_set_is_completed_not_reused(tmp_path, monkeypatch):
    """Ctrl-C while demonstrations were played, then the same command: it once trained on
    the 122 of 261 episodes that were there, without a word."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "demonstrations"
    real_score = sft.score  # the demonstrations module's own names (imported at its top)

    def interrupted(specs, run_dir):
        for folder in sorted(Path(run_dir).rglob("instance_*"))[2:]:
            shutil.rmtree(folder)  # what a Ctrl-C half-way through playing leaves
        raise KeyboardInterrupt

    monkeypatch.setattr(sft, "score", interrupted)
    with pytest.raises(KeyboardInterrupt):
        sft.play_demonstrations(["referencegame"], out, max_instances=1)
    run_dir = out / "instances_train" / "programmatic"
    assert len(list(run_dir.rglob("interactions.json"))) == 2
    assert not (run_dir / sft.DEMONSTRATIONS_MARKER).exists()

    monkeypatch.setattr(sft, "score", real_score)
    played = []
    real_play = sft.play
    monkeypatch.setattr(sft, "play", lambda specs, *a, **k: played.append(
        [s.game_name for s in specs]) or real_play(specs, *a, **k))
    assert sft.play_demonstrations(["referencegame"], out, max_instances=1) == run_dir
    assert len(list(run_dir.rglob("interactions.json"))) == 5  # the whole set, played again
    marker = json.loads((run_dir / sft.DEMONSTRATIONS_MARKER).read_text())
    assert marker["games"] == {"referencegame": {"episodes": 5, "max_instances": 1}}

    sft.play_demonstrations(["referencegame"], out, max_instances=1)  # complete: reused
    sft.play_demonstrations(["referencegame", "wordle"], out, max_instances=1)  # only wordle is played
    assert played == [["referencegame"], ["wordle"]]
    assert set(json.loads((run_dir / sft.DEMONSTRATIONS_MARKER).read_text())["games"]) == {"referencegame", "wordle"}
    shutil.rmtree(next((run_dir / "wordle").rglob("instance_*")))  # an episode lost since
    sft.play_demonstrations(["referencegame", "wordle"], out, max_instances=1)
    assert played[-1] == ["wordle"]


# ----------------------------------------------------------------------------- the own loops: populations, SPAG

POPULATION_RUN = ["-T", "1.0", "-L", "4", "--games", "relay", "--train-instances", "instances", "--matches-per-epoch",
                  "1", "--num-generations", "2", "--lora-r", "2"]


def invoke(*args):
    from click.testing import CliRunner
    from playpen.cli import cli
    return CliRunner().invoke(cli, [str(a) for a in args])


def lines_of(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.mark.parametrize("trainer", ["fsp", "league"])
def test_a_population_run_is_locked_stopped_by_ctrl_c_and_resumed_after_its_last_epoch(toy_workspace, trainer):
    """fsp once answered a second run, and its own re-run after Ctrl-C, with "holds a
    population run already: pass --overwrite" (an invitation to overwrite a live run), and
    --resume was an unknown option."""
    run_dir = toy_workspace / "models" / f"{trainer}+lora" / "tiny-random"
    first = start_playpen(toy_workspace, "run", trainer, "-l", "tiny-random", *POPULATION_RUN, "--epochs", "1000")
    wait_for(lambda: training.latest_checkpoint(run_dir) is not None, first, what="the first epoch's checkpoint")
    second = invoke("run", trainer, "-l", "tiny-random", *POPULATION_RUN, "--epochs", "2", "--resume")
    error = [line for line in second.stderr.splitlines() if line.startswith("playpen: error:")]
    assert second.exit_code == 2 and len(error) == 1, second.output[-3000:]
    assert f"(PID {first.pid}: " in error[0] and "is in use by another run" in error[0] and "overwrite" not in error[0]
    first.send_signal(signal.SIGINT)
    out, err = first.communicate(timeout=300)
    assert first.returncode == 130, err[-3000:]
    assert "playpen: interrupted by SIGINT" in err and "Traceback" not in err
    assert not (run_dir / ".playpen.lock").exists()
    last = training.latest_checkpoint(run_dir)
    done, state = training.checkpoint_step(last), training.read_state(last)
    assert state["global_step"] == done >= 1 and all((last / "optimizers" / f"{n}.pt").is_file()
                                                      for n in state["entrants"])
    assert [m["epoch"] for m in lines_of(run_dir / "metrics.jsonl")] == list(range(done))
    summary = json.loads((run_dir / "playpen-run.json").read_text())
    assert summary["interrupted"] is True and summary["signal"] == "SIGINT" and summary["epochs_done"] == done
    adapters = run_dir / "population" / "adapters"
    frozen = {p: (adapters / p / "adapter_model.safetensors").read_bytes() for p in state["players"]
              if (adapters / p).is_dir()}
    assert frozen

    resumed = invoke("run", trainer, "-l", "tiny-random", *POPULATION_RUN, "--epochs", done + 1, "--resume")
    assert resumed.exit_code == 0, resumed.output[-3000:]
    assert f"--resume: after epoch {done - 1} (checkpoint-{done})" in resumed.output
    assert [m["epoch"] for m in lines_of(run_dir / "metrics.jsonl")] == list(range(done + 1))
    assert [s["step"] for s in lines_of(run_dir / "playpen-log.jsonl") if s["event"] == "train_step"] == \
        list(range(1, done + 2))
    assert {m["epoch"] for m in lines_of(run_dir / "matches.jsonl")} == set(range(done + 1))
    after = training.read_state(training.latest_checkpoint(run_dir))
    assert after["global_step"] == done + 1 and set(state["players"]) < set(after["players"])
    assert all((adapters / p / "adapter_model.safetensors").read_bytes() == w for p, w in frozen.items())


def test_spag_stopped_by_ctrl_c_resumes_inside_its_phase(tiny_workspace):
    run_dir = tiny_workspace / "models" / "spag+lora" / "tiny-random"
    spag = ["-L", "6", "-T", "1.0", "--demo-max-instances", "1", "--batch-size", "1", "--lora-r", "2",
            "--max-length", "800", "--episodes-per-epoch", "2", "--max-steps", "1", "--no-winners-only", "--no-evaluate"]
    first = start_playpen(tiny_workspace, "run", "spag", "-l", "tiny-random", *spag, "--imitation-steps", "100000")
    wait_for(lambda: logged_steps_of(run_dir) >= 2, first, what="two imitation steps")
    first.send_signal(signal.SIGINT)
    out, err = first.communicate(timeout=300)
    assert first.returncode == 130, err[-3000:]
    assert "playpen: interrupted by SIGINT" in err and "Traceback" not in err and "continue with --resume" in out
    last = training.latest_checkpoint(run_dir)
    state = training.read_state(last)
    done = state["global_step"]
    assert (state["phase"], state["phase_step"]) == ("imitation", done) and done == logged_steps_of(run_dir) >= 2
    assert (last / "adapter_model.safetensors").is_file() and (last / "optimizer.pt").is_file()

    resumed = invoke("run", "spag", "-l", "tiny-random", *spag, "--imitation-steps", done + 1, "--resume")
    assert resumed.exit_code == 0, resumed.output[-3000:]
    assert f"imitation: resumed after step {done}" in resumed.output
    # the last imitation step, then SPAG-1's one (none when its self-play gave no sample)
    steps = [s["step"] for s in lines_of(run_dir / "playpen-log.jsonl") if s["event"] == "train_step"]
    assert steps[:done + 1] == list(range(1, done + 2)) and len(steps) in (done + 1, done + 2)
    import torch
    final = training.latest_checkpoint(run_dir)
    assert training.read_state(final)["phase"] == "SPAG-1" and training.checkpoint_step(final) == done + 2
    optimizer = torch.load(final / "optimizer.pt")["optimizer"]["state"]
    assert {int(v["step"]) for v in optimizer.values()} == {len(steps)}  # AdamW's state went on from the checkpoint


def logged_steps_of(run_dir: Path) -> int:
    log = run_dir / "playpen-log.jsonl"
    return log.read_text().count('"train_step"') if log.exists() else 0


@pytest.mark.parametrize("trainer, args, expected", [
    ("fsp", ["--resume"], "--resume: no complete checkpoint"),
    ("league", ["--lr-scheduler-type", "sometimes"], "option --lr-scheduler-type: 'sometimes' is not valid"),
    ("spag", ["--resume"], "--resume: no complete checkpoint"),
    ("spag", ["--max-grad-norm", "-1"], "option --max-grad-norm: -1.0 is not valid"),
    ("league", ["--num-processes", "2"], "League runs on one process"),
])
def test_an_own_loop_run_refused_for_a_user_mistake_leaves_nothing_behind(toy_workspace, trainer, args, expected):
    result = invoke("run", trainer, "-l", "tiny-random", *POPULATION_RUN[4:8] * (trainer != "spag"), *args)
    assert result.exit_code == 2, result.output[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("playpen: error:")]
    assert len(errors) == 1 and expected in errors[0] and "Traceback" not in result.output
    assert not (toy_workspace / "models").exists()
