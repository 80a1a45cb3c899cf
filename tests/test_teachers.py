"""Partners: programmatic, API models over a real local OpenAI-compatible HTTP server."""
import json
import socket

import pytest

from openai_server import ScriptedServer
from rollout_helpers import make_learner

from playpen.errors import PlaypenError
from playpen.rollouts import rollout
from playpen.rollouts.partners import ClemPartner, PartnerError, ProgrammaticPartner, as_partner


def _register_scripted(workspace, base_url):
    registry = json.loads((workspace / "model_registry.json").read_text())
    registry.append({"model_name": "scripted", "backend": "openai_compatible", "model_id": "scripted"})
    (workspace / "model_registry.json").write_text(json.dumps(registry))
    (workspace / "key.json").write_text(json.dumps({"openai_compatible": {"api_key": "test", "base_url": base_url}}))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_api_partner_runs_concurrently_and_bounded(toy_workspace, tiny_pair):
    with ScriptedServer(delay=0.3) as server:
        _register_scripted(toy_workspace, server.base_url)
        partner = as_partner("scripted", max_in_flight=3)
        assert isinstance(partner, ClemPartner)
        result = rollout("relay", make_learner(tiny_pair), partners={"Speaker": partner},
                         instances=lambda row: row["experiment"]["name"] == "lenient", num_repeats=2,
                         run_name="api")
    assert len(result.episodes) == 6
    assert all(e.models == {"Player 1": "scripted", "Player 2": "tiny-random"} for e in result.episodes)
    assert all(e.turns[0].response == f"WORD: {e.turns[0].context.split(chr(39))[1]}" for e in result.episodes)
    assert server.requests >= 6
    assert 1 < server.max_in_flight <= 3
    requests = json.loads((result.episodes[0].path / "player_1.requests.json").read_text())
    assert requests["calls"][0]["call"]["raw_response_obj"]["choices"][0]["message"]["content"].startswith("WORD:")


def test_unreachable_server_is_a_clear_error(toy_workspace, tiny_pair):
    _register_scripted(toy_workspace, f"http://127.0.0.1:{_free_port()}/v1")
    with pytest.raises(PlaypenError, match="cannot reach its server at http://127.0.0.1:.*Is the server running"):
        rollout("relay", make_learner(tiny_pair), partners={"Speaker": "scripted"}, records_dir=None)


def test_failing_calls_are_retried_then_raised():
    class Flaky:
        name = "flaky"
        calls = 0

        def generate_response(self, messages):
            Flaky.calls += 1
            if Flaky.calls < 2:
                raise ConnectionError("reset by peer")
            return {}, {}, "ok"

    from playpen.rollouts.partners import TurnRequest
    partner = ClemPartner(Flaky(), retries=1, retry_delay=0.01)
    request = TurnRequest(None, {"role": "user", "content": "x"}, ({"role": "user", "content": "x"},))
    assert partner.respond([request])[0].text == "ok"
    Flaky.calls = -5
    with pytest.raises(PartnerError, match="partner 'flaky' failed after 2 attempt.*reset by peer"):
        partner.respond([request])


def test_as_partner_conversions(tiny_pair):
    assert isinstance(as_partner("programmatic"), ProgrammaticPartner)
    assert as_partner("learner") == "learner"
    teacher = as_partner(make_learner(tiny_pair, name="frozen"))
    assert teacher.name == "frozen" and teacher.generates
    with pytest.raises(TypeError, match="cannot use 3 as a partner"):
        as_partner(3)
