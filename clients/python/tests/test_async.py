"""The asyncio client on the same core: a hundred calls awaited together on one connection,
each matched to its own request; a cancelled task gives its call up and frees its slot. The asyncio stream is in test_stream.py."""
from __future__ import annotations

import asyncio
import time

from edge_ai_bridge import AsyncBridgeClient
from fake_upstream import answer_to
from harness import Harness, ask, unique


def test_a_hundred_calls_awaited_together_each_get_their_own_reply(h: Harness, mode: str) -> None:
    stack = h.stack(mode)
    stack.upstream.delay = 0.2
    prompts = [f"async part {i} ({unique('q')})" for i in range(100)]

    async def run() -> list:
        async with await AsyncBridgeClient.connect(stack.url, unique("cam"), connect_timeout=10) as client:
            h.track(client)
            return await asyncio.gather(*(client.chat(ask(p, cache=False), timeout=30) for p in prompts))

    started = time.monotonic()
    replies = asyncio.run(run())
    assert [r["content"] for r in replies] == [answer_to(p) for p in prompts]
    assert sorted(c.prompt for c in stack.upstream.chat_calls()) == sorted(prompts)
    assert time.monotonic() - started < 10


def test_a_cancelled_call_frees_its_slot_at_once(h: Harness) -> None:
    stack = h.stack()
    stack.upstream.delay = 3.0  # read by the first call's handler only

    async def run() -> dict:
        client = h.track(await AsyncBridgeClient.connect(stack.url, unique("cam"), max_in_flight=1))
        first = asyncio.ensure_future(client.chat(ask("given up")))
        while not stack.upstream.chat_calls():
            await asyncio.sleep(0.01)
        stack.upstream.delay = 0.0
        first.cancel()
        # With one slot, this goes out only once the cancelled call has freed it: long before
        # the first call's reply, which comes after the test and is dropped.
        second = await client.chat(ask("asked next"), timeout=1.5)
        assert first.cancelled()
        return second

    reply = asyncio.run(run())
    assert reply["content"] == answer_to("asked next")
