"""A local OpenAI-compatible chat server (stdlib only) with a scripted policy, for tests.

The policy plays the toy game `relay`: asked for the secret word it answers
`WORD: <word>`; given `WORD: x` it answers `GUESS: x`. It counts requests and the
most requests in flight at once (to check bounded concurrency). A broken server for the
limits tests: `delay` seconds before each answer (a hanging server), or `status` (e.g.
500) instead of an answer. `reply` (messages -> text) replaces the scripted policy, e.g. a
judge's.
"""
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def scripted_reply(messages):
    text = messages[-1]["content"] if messages else ""
    secret = re.search(r"secret word '([^']+)'", text)
    if secret:
        return f"WORD: {secret.group(1)}"
    word = re.search(r"WORD:\s*(\S+)", text)
    if word:
        return f"GUESS: {word.group(1)}"
    return "I do not know."


class ScriptedServer:
    def __init__(self, delay: float = 0.0, status: int = 200, reply=None):
        self.delay = delay
        self.reply = reply or scripted_reply
        self.status = status
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code, payload):
                body = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                request = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests += 1
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    time.sleep(server.delay)
                    reply = server.reply(request.get("messages", []))
                finally:
                    with server._lock:
                        server.in_flight -= 1
                if server.status != 200:
                    try:
                        self._send(server.status, {"error": {"message": "scripted failure", "type": "server_error"}})
                    except OSError:  # the client gave up waiting
                        pass
                    return
                try:
                    self._send(200, {
                        "id": f"chatcmpl-{server.requests}", "object": "chat.completion",
                        "created": int(time.time()), "model": request.get("model", "scripted"),
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": reply}}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
                except OSError:  # the client gave up waiting (a read timeout)
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
