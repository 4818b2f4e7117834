"""Calls over one connection against a real bridge: a hundred in flight, each reply matched
to its own request (MQTT 5 by Correlation Data, MQTT 3.1.1 by id), on the embedded broker and
on a plant's Mosquitto; embeddings, templates and raw images; MQTT 3.1.1 when the broker refuses 5. Asserted on what the device got and what
the upstream was asked."""
from __future__ import annotations

import json
import struct
import time
import zlib
from pathlib import Path
from typing import Any, Dict

import pytest

from edge_ai_bridge import BridgeClient
from fake_upstream import answer_to
from harness import Harness, ask, unique
from mqtt311_proxy import Mqtt311OnlyProxy


@pytest.mark.parametrize("protocol", [5, 4])
def test_a_hundred_requests_in_flight_each_get_their_own_reply(h: Harness, mode: str, protocol: int) -> None:
    stack = h.stack(mode)
    stack.upstream.delay = 0.2
    client = h.client(stack, unique("cam"), protocol=protocol)
    assert client.protocol == protocol
    prompts = [f"part {i}: is the weld sound? ({unique('q')})" for i in range(100)]
    started = time.monotonic()
    results = client.batch([ask(p, cache=False) for p in prompts], concurrency=100, timeout=30)
    elapsed = time.monotonic() - started

    assert [r["content"] if isinstance(r, dict) else r for r in results] == [answer_to(p) for p in prompts]
    assert len({r["id"] for r in results}) == 100
    assert sorted(c.prompt for c in stack.upstream.chat_calls()) == sorted(prompts)
    # One after another they would take 100 x 0.2 s; in flight together, a fraction of it.
    assert elapsed < 10, elapsed


def test_embed_returns_the_vector_of_its_input(h: Harness) -> None:
    stack = h.stack()
    client = h.client(stack, unique("cam"))
    reply = client.embed("worn gear tooth", cache=False)
    assert reply["ok"] is True and len(reply["embedding"]) == 8
    [call] = stack.upstream.calls
    assert call.path == "/v1/embeddings" and call.body["input"] == "worn gear tooth"


def config_file(tmp_path: Path, templates: Dict[str, Any]) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"templates": templates}))
    return str(path)


def test_template_is_rendered_by_the_bridge(h: Harness, tmp_path: Path) -> None:
    template = {"messages": [{"role": "user", "content": "Describe {{thing}}"}]}
    stack = h.stack(env={"CONFIG_FILE": config_file(tmp_path, {"describe": template})})
    client = h.client(stack, unique("cam"))
    reply = client.template("describe", {"thing": "the belt"}, priority="high")
    assert reply["content"] == answer_to("Describe the belt")
    assert reply["priority"] == "high"
    assert [c.prompt for c in stack.upstream.chat_calls()] == ["Describe the belt"]


def test_a_raw_image_goes_with_its_template_and_vars(h: Harness, tmp_path: Path) -> None:
    template = {"messages": [{"role": "user", "content": "Inspect part {{part}}"}]}
    stack = h.stack(env={"CONFIG_FILE": config_file(tmp_path, {"inspect": template})})
    client = h.client(stack, unique("cam"))
    reply = client.image(tiny_png(), template="inspect", vars={"part": "A7"}, id="frame-1")
    assert (reply["id"], reply["content"]) == ("frame-1", answer_to("Inspect part A7"))
    [call] = stack.upstream.chat_calls()
    parts = call.body["messages"][-1]["content"]
    assert any(p.get("type") == "image_url" and p["image_url"]["url"].startswith("data:image/png;base64,") for p in parts)


def tiny_png() -> bytes:
    """A whole 1x1 PNG: the bridge checks an image's bytes, start and end."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b"")


def test_a_broker_that_refuses_mqtt_5_is_asked_again_with_3_1_1(h: Harness) -> None:
    stack = h.stack()
    assert stack.bridge.mqtt_port is not None
    proxy = Mqtt311OnlyProxy(stack.bridge.mqtt_port)
    try:
        client = h.track(BridgeClient.connect(f"mqtt://127.0.0.1:{proxy.port}", unique("cam"), connect_timeout=10))
        assert (client.protocol, proxy.refused_mqtt5) == (4, 1)
        assert client.reply_topic.endswith("/result")
        assert client.chat(ask("over 3.1.1"))["content"] == answer_to("over 3.1.1")
    finally:
        proxy.close()
