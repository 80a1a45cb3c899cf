"""Remote (API) models against a real local HTTP server on 127.0.0.1: connect/read timeouts,
bounded retries, slow or retried calls said once, and `playpen eval` with a server that is
down or failing: one line with the URL, nothing left behind."""
import json
import socket
import time

import pytest
from click.testing import CliRunner

from openai_server import ScriptedServer

from playpen import remote
from playpen.cli import cli
from playpen.errors import RemoteModelError
from playpen.remote import RemoteLimits

MESSAGES = [{"role": "user", "content": "Say the secret word 'apple'."}]


def register_scripted(workspace, base_url):
    path = workspace / "model_registry.json"
    registry = json.loads(path.read_text()) if path.exists() else []
    registry.append({"model_name": "scripted", "backend": "openai_compatible", "model_id": "scripted"})
    path.write_text(json.dumps(registry))
    (workspace / "key.json").write_text(json.dumps({"openai_compatible": {"api_key": "test", "base_url": base_url}}))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def limits(monkeypatch):
    """Set the process-wide remote limits for one test (restored after it)."""
    def set_limits(**kwargs):
        monkeypatch.setattr(remote, "_limits", RemoteLimits(**kwargs))
    return set_limits


def load_scripted():
    from playpen.models import load_model_by_name
    return load_model_by_name("scripted", role="partner")


def test_a_hanging_server_times_out_within_the_limits(tmp_path, monkeypatch, limits, capsys):
    """400 s per request once stalled a step for 479 s; now a call ends after read timeout x attempts."""
    monkeypatch.chdir(tmp_path)
    with ScriptedServer(delay=5.0) as server:
        register_scripted(tmp_path, server.base_url)
        limits(connect_timeout=2, read_timeout=0.5, retries=1, retry_budget=30)
        model = load_scripted()
        started = time.monotonic()
        with pytest.raises(RemoteModelError, match=r"model 'scripted' at http://127\.0\.0\.1:\d+/v1.*2 attempt"):
            model.generate_response(MESSAGES)
        took = time.monotonic() - started
        assert server.requests == 2  # no hidden retries by clemcore (3 x 10 s) or the OpenAI client (2)
    # ~2 s (2 x 0.5 s read timeout + a 1 s wait); a timeout not applied would wait out the 5 s delay.
    # The bound leaves room for a loaded CI machine (4.5 s once, beside a benchmark, on 2 cores).
    assert took < 8, f"a call took {took:.1f} s"
    err = capsys.readouterr().err
    assert err.count("retrying") == 1 and "Timeout" in err


def test_persistent_500s_make_a_bounded_number_of_requests(tmp_path, monkeypatch, limits, capsys):
    """36 requests for 2 episodes once (3 clemcore tries x 3 client tries x 2 partner tries x 2)."""
    monkeypatch.chdir(tmp_path)
    with ScriptedServer(status=500) as server:
        register_scripted(tmp_path, server.base_url)
        limits(retries=2, retry_budget=30)
        model = load_scripted()
        for _ in range(2):
            with pytest.raises(RemoteModelError, match="3 attempt.*InternalServerError"):
                model.generate_response(MESSAGES)
        assert server.requests == 6
    assert capsys.readouterr().err.count("retrying") == 1  # said once per model, not per call


def test_the_retry_budget_bounds_a_call_in_time(tmp_path, monkeypatch, limits):
    monkeypatch.chdir(tmp_path)
    with ScriptedServer(status=503) as server:
        register_scripted(tmp_path, server.base_url)
        limits(retries=10, retry_budget=2.5)  # retries 1 s and 2 s apart: the third would start after 3 s
        started = time.monotonic()
        with pytest.raises(RemoteModelError, match="2 attempt"):
            load_scripted().generate_response(MESSAGES)
        assert server.requests == 2 and time.monotonic() - started < 2.5


def test_client_errors_are_not_retried(tmp_path, monkeypatch, limits):
    monkeypatch.chdir(tmp_path)
    with ScriptedServer(status=401) as server:
        register_scripted(tmp_path, server.base_url)
        limits(retries=3)
        with pytest.raises(RemoteModelError, match="1 attempt"):
            load_scripted().generate_response(MESSAGES)
        assert server.requests == 1


def test_a_slow_call_is_said_once_and_answers(tmp_path, monkeypatch, limits, capsys):
    monkeypatch.chdir(tmp_path)
    with ScriptedServer(delay=0.3) as server:
        register_scripted(tmp_path, server.base_url)
        limits(slow_call=0.1)
        model = load_scripted()
        assert model.generate_response(MESSAGES)[2] == "WORD: apple"
        assert model.generate_response(MESSAGES)[2] == "WORD: apple"
    assert capsys.readouterr().err.count("slow call") == 1


@pytest.mark.parametrize("value, option", [("0", "--read-timeout"), ("-1", "--connect-timeout"),
                                           ("-1", "--retries"), ("0", "--retry-budget")])
def test_remote_limit_options_are_checked(tmp_path, monkeypatch, value, option):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["eval", "-m", "programmatic", "-g", "taboo", option, value])
    assert result.exit_code == 2 and f"option {option}: " in result.output, result.output


def test_eval_with_the_server_down_fails_fast_and_leaves_nothing(toy_workspace):
    """It once retried for 54 s, ended with "no scored episodes" without the URL, and left a
    folder that blocked the re-run."""
    url = f"http://127.0.0.1:{free_port()}/v1"
    register_scripted(toy_workspace, url)
    started = time.monotonic()
    result = CliRunner().invoke(cli, ["eval", "-m", "scripted", "-g", "relay", "-n", "1"])
    assert result.exit_code == 2, result.output
    assert f"model 'scripted' cannot reach its server at {url}" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert time.monotonic() - started < 15
    assert not (toy_workspace / "results").exists()


def test_eval_with_a_failing_server_leaves_no_folder(toy_workspace):
    with ScriptedServer(status=500) as server:
        register_scripted(toy_workspace, server.base_url)
        result = CliRunner().invoke(cli, ["eval", "-m", "scripted", "-g", "relay", "-n", "1", "--retries", "0"])
        assert server.requests >= 1
    assert result.exit_code == 2, result.output
    assert server.base_url in result.output and "InternalServerError" in result.output
    assert not (toy_workspace / "results" / "scripted").exists()
