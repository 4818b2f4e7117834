"""A fake OpenAI-compatible upstream the tests control: it answers each chat with
``echo: {last user message}`` after ``delay`` seconds (or never, with ``hang``), streams as
server-sent events when asked, can drop the next stream after some chunks, and records every
call it received (body and ``time.monotonic()``), so tests assert on what the bridge asked."""
from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, List, Optional

CHUNK_CHARS = 8


@dataclass
class Recorded:
    path: str
    body: Dict[str, Any]
    time: float = field(default_factory=time.monotonic)

    @property
    def prompt(self) -> str:
        return last_user(self.body)


def last_user(body: Dict[str, Any]) -> str:
    users = [m for m in body.get("messages", []) if isinstance(m, dict) and m.get("role") == "user"]
    content = users[-1].get("content", "") if users else ""
    if isinstance(content, str):
        return content
    return " ".join(p["text"] for p in content if isinstance(p, dict) and p.get("type") == "text")


def answer_to(prompt: str) -> str:
    """What the fake answers to a prompt: tests compare replies with it."""
    return f"echo: {prompt}"


class FakeUpstream:
    def __init__(self) -> None:
        self.delay = 0.0
        self.hang = False
        self.chunk_interval = 0.005
        self.calls: List[Recorded] = []
        self._drop_next_stream_after: Optional[int] = None
        self._changed = threading.Condition()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def drop_next_stream(self, after_chunks: int) -> None:
        """The next streaming call sends this many chunks of text, then its connection drops."""
        self._drop_next_stream_after = after_chunks

    def chat_calls(self) -> List[Recorded]:
        with self._changed:
            return [c for c in self.calls if c.path.endswith("/chat/completions")]

    def wait_for(self, predicate: Callable[[List[Recorded]], bool], timeout: float = 10.0) -> None:
        """Waits until ``predicate(calls)`` holds, or fails the test."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(self.calls):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"upstream: condition not met within {timeout} s ({len(self.calls)} calls)")
                self._changed.wait(left)

    def close(self) -> None:
        self._stopping.set()  # releases the handlers that hang
        self._server.shutdown()
        self._server.server_close()

    def _record(self, path: str, body: Dict[str, Any]) -> None:
        with self._changed:
            self.calls.append(Recorded(path, body))
            self._changed.notify_all()

    def _take_drop(self) -> Optional[int]:
        with self._changed:
            after, self._drop_next_stream_after = self._drop_next_stream_after, None
            return after

    def _handler(self) -> type:
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                upstream._record(self.path, body)
                if upstream.hang:
                    upstream._stopping.wait(60)
                    return self._drop()
                if upstream._stopping.wait(upstream.delay):
                    return self._drop()
                if self.path.endswith("/embeddings"):
                    return self._json(embeddings(body))
                if body.get("stream") is True:
                    return self._stream(completion(body), upstream._take_drop())
                return self._json(completion(body))

            def _json(self, value: Any) -> None:
                data = json.dumps(value).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, done: Dict[str, Any], drop_after: Optional[int]) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                events = stream_events(done)
                for index, event in enumerate(events):
                    if drop_after is not None and index == drop_after + 1:  # + the role event
                        return self._drop()
                    self._chunk(f"data: {json.dumps(event)}\n\n")
                    time.sleep(upstream.chunk_interval)
                self._chunk("data: [DONE]\n\n")
                self.wfile.write(b"0\r\n\r\n")

            def _chunk(self, text: str) -> None:
                data = text.encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

            def _drop(self) -> None:
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        return Handler


def completion(body: Dict[str, Any]) -> Dict[str, Any]:
    content = answer_to(last_user(body))
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model") or "fake-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
    }


def stream_events(done: Dict[str, Any]) -> List[Dict[str, Any]]:
    """OpenAI's chunks of a completion: the role, the text 8 characters at a time, the finish, the usage."""
    head = {"id": done["id"], "object": "chat.completion.chunk", "created": done["created"], "model": done["model"]}
    text = done["choices"][0]["message"]["content"]

    def chunk(delta: Dict[str, Any], finish: Optional[str]) -> Dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    pieces = [chunk({"content": text[i : i + CHUNK_CHARS]}, None) for i in range(0, len(text), CHUNK_CHARS)]
    return [chunk({"role": "assistant", "content": ""}, None), *pieces, chunk({}, "stop"), {**head, "choices": [], "usage": done["usage"]}]


def embeddings(body: Dict[str, Any]) -> Dict[str, Any]:
    inputs = [body["input"]] if isinstance(body.get("input"), str) else list(body.get("input", []))
    vectors = [[b / 255 for b in hashlib.sha256(text.encode()).digest()[:8]] for text in inputs]
    return {
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
        "model": body.get("model") or "fake-embedding",
        "usage": {"prompt_tokens": len(inputs), "total_tokens": len(inputs)},
    }
