"""Streams across a mid-stream break: the upstream drops its first streaming call after a
few chunks, the bridge tries again and says ``reset``; the device's events hold that reset,
and the text after the last reset is exactly the reply's content, the whole answer. Through
the synchronous and the asyncio client."""
from __future__ import annotations

import asyncio
from typing import Any, Dict, List

from edge_ai_bridge import AsyncBridgeClient
from fake_upstream import answer_to
from harness import Harness, Stack, ask, unique

PROMPT = "Describe the defect on the left flank of the gear, in a sentence or two."


def broken_stream_stack(h: Harness) -> Stack:
    # Every piece of text is its own chunk (STREAM_FLUSH_MS 0), so the reset comes after some.
    stack = h.stack(env={"STREAM_FLUSH_MS": "0"})
    stack.upstream.drop_next_stream(after_chunks=3)
    return stack


def check_reassembled(stack: Stack, events: List[Dict[str, Any]], reply: Dict[str, Any]) -> None:
    assert reply["content"] == answer_to(PROMPT)
    resets = [i for i, e in enumerate(events) if e == {"reset": True}]
    assert resets, events
    before, after = events[: resets[0]], events[resets[-1] + 1 :]
    assert before and all("delta" in e for e in before)
    assert "".join(e["delta"] for e in after) == reply["content"]
    # Streamed after the reset as it was written, not mended by the client in one delta.
    assert len(after) > 1
    assert [c.body.get("stream") for c in stack.upstream.chat_calls()] == [True, True]


def test_a_stream_is_reassembled_across_a_reset(h: Harness) -> None:
    stack = broken_stream_stack(h)
    client = h.client(stack, unique("hmi"))
    stream = client.stream(ask(PROMPT), timeout=20)
    events = list(stream)
    check_reassembled(stack, events, stream.reply)


def test_a_stream_is_reassembled_across_a_reset_with_asyncio(h: Harness) -> None:
    stack = broken_stream_stack(h)

    async def run() -> None:
        client = h.track(await AsyncBridgeClient.connect(stack.url, unique("hmi")))
        stream = client.stream(ask(PROMPT), timeout=20)
        events = [event async for event in stream]
        check_reassembled(stack, events, stream.reply)

    asyncio.run(run())
