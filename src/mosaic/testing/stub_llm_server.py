"""A local server that speaks the OpenAI chat-completions protocol, with scripted replies.

For tests and offline runs: nothing is downloaded and no model runs. Each request
to ``POST /v1/chat/completions`` takes the next entry of a script (or asks a
function), which says what to answer:

- ``"text"`` (a plain string): a normal completion with that content;
- ``{"text": ..., "delay_s": 2.0}``: the same, after a pause (for timeouts);
- ``{"status": 500, "error": "overloaded"}``: an HTTP error with OpenAI's error body;
- ``{"raw": "not json", "status": 200}``: a body that is not a chat completion.

When the script runs out, the last entry repeats. Token counts are words, split
on whitespace. ``GET /v1/models`` lists the one model. Every request's JSON body
is kept in :attr:`StubServer.requests`.

    with StubServer(["e2e4", {"status": 503}, "resign"]) as server:
        config = ModelConfig(base_url=server.base_url, model=server.model, api_key_env="ANY_SET_VARIABLE")

``python -m mosaic.testing.stub_llm_server --reply "move 3"`` serves one reply for ever, for
trying a worker by hand.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Sequence, Union

Entry = Union[str, dict]
Script = Union[Sequence[Entry], Callable[[dict], Entry]]


class StubServer:
    def __init__(self, script: Script, model: str = "stub-model", host: str = "127.0.0.1", port: int = 0) -> None:
        self.script = script
        self.model = model
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer((host, port), _handler(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> "StubServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="mosaic-llm-stub", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> "StubServer":
        return self.start()

    def __exit__(self, *_exc: Any) -> None:
        self.close()

    def next_entry(self, body: dict) -> Entry:
        with self._lock:
            self.requests.append(body)
            if callable(self.script):
                return self.script(body)
            index = min(len(self.requests), len(self.script)) - 1
            return self.script[index]


def pointed_at(config: dict[str, Any], server: StubServer, key_env: str | None = None) -> dict[str, Any]:
    """``config`` with its language model's endpoint pointed at ``server`` (and its key variable at ``key_env``
    when given): the endpoint a config names is the user's and is not running here. Only a ``model`` section
    that names an endpoint (``base_url``, as the LLM workers' do) is one; another worker's ``model`` (BenchMARL's
    network) is left as it is."""
    model = config.get("model")
    if not (isinstance(model, dict) and "base_url" in model):
        return config
    endpoint = {"base_url": server.base_url, **({"api_key_env": key_env} if key_env else {})}
    return {**config, "model": {**model, **endpoint}}


def completion(model: str, text: str, messages: list[dict]) -> dict[str, Any]:
    prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in messages)
    completion_tokens = len(text.split())
    return {"id": f"chatcmpl-stub-{time.monotonic_ns()}", "object": "chat.completion", "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


def _handler(server: StubServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # headers and body leave in two writes: with Nagle's algorithm on, the body waits for the client's
        # delayed ACK of the headers (about 40 ms a reply), as no real server makes its clients wait
        disable_nagle_algorithm = True

        def log_message(self, *_args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting
                pass

        def do_GET(self) -> None:  # noqa: N802  (http.server's name)
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, json.dumps({"object": "list", "data": [
                    {"id": server.model, "object": "model", "owned_by": "mosaic-stub"}]}).encode())
            else:
                self._send(404, b'{"error": {"message": "not found"}}')

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                self._send(400, b'{"error": {"message": "the body is not JSON"}}')
                return
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, b'{"error": {"message": "not found"}}')
                return
            entry = server.next_entry(body)
            spec = {"text": entry} if isinstance(entry, str) else dict(entry)
            if spec.get("delay_s"):
                time.sleep(float(spec["delay_s"]))
            status = int(spec.get("status", 200))
            if "raw" in spec:
                self._send(status, str(spec["raw"]).encode(), "text/plain")
            elif status != 200:
                self._send(status, json.dumps({"error": {"message": spec.get("error", f"HTTP {status}"),
                                                         "type": "stub_error"}}).encode())
            else:
                self._send(200, json.dumps(completion(server.model, str(spec.get("text", "")),
                                                      body.get("messages") or [])).encode())

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="An OpenAI-compatible server that answers every request "
                                                 "with the same reply.")
    parser.add_argument("--reply", default="", help="the reply's text")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model", default="stub-model")
    args = parser.parse_args(argv)
    server = StubServer([args.reply], model=args.model, port=args.port)
    print(f"serving {server.base_url} (model {args.model})", flush=True)
    try:
        server._httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._httpd.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
