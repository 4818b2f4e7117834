"""Typed errors carry the contract's codes, and the client's own (timeout, closed, offline);
a refusal of the request itself is not retried. A plant's Mosquitto shows the spy every
publish (the embedded broker does not forward a request it refused at intake)."""
from __future__ import annotations

import asyncio
import threading
import time
from typing import Callable, List, Tuple

import pytest

from edge_ai_bridge import AsyncBridgeClient, BridgeRequestError
from harness import Harness, ask, unique


def test_refusals_of_the_request_itself_are_not_retried(h: Harness) -> None:
    # One upstream call at a time: A holds it for 1 s, so B (ttl_ms 1) expires in the queue.
    stack = h.stack("external", {"MAX_CONCURRENCY": "1"})
    stack.upstream.delay = 1.0
    device = unique("cam")
    spy = h.spy(stack, device)
    client = h.client(stack, device)
    a = threading.Thread(target=client.chat, args=(ask("A"),))
    a.start()
    stack.upstream.wait_for(lambda calls: len(calls) == 1)

    with pytest.raises(BridgeRequestError) as expired:
        client.chat(ask("B", ttl_ms=1))
    with pytest.raises(BridgeRequestError) as invalid:
        client.chat({"messages": [{"role": "robot", "content": "C"}]})
    a.join(10)
    # A's reply comes after any retry of B or C would have gone out (backoff <= 0.5 s).
    spy.wait_for(lambda: any(s.payload.get("ok") is True for s in spy.seen))

    assert (expired.value.code, invalid.value.code) == ("expired", "invalid_request")
    for error in (expired.value, invalid.value):
        assert error.attempts == 1 and error.reply is not None and error.reply["ok"] is False
        assert len(spy.publishes(error.request_id)) == 1
    assert "role" in str(invalid.value)
    assert [c.prompt for c in stack.upstream.chat_calls()] == ["A"]


def test_a_call_nobody_answers_times_out_at_its_deadline(h: Harness) -> None:
    stack = h.stack()
    stack.upstream.hang = True
    client = h.client(stack, unique("cam"), attempt_timeout=0.3)
    started = time.monotonic()
    with pytest.raises(BridgeRequestError) as err:
        client.chat(ask("anyone there?"), timeout=1.0)
    elapsed = time.monotonic() - started
    assert err.value.code == "timeout"
    assert 1.0 <= elapsed < 2.0
    assert err.value.attempts >= 3  # sent again after each attempt timeout, one id
    assert len(stack.upstream.chat_calls()) == 1


def test_close_fails_a_pending_call_with_closed(h: Harness) -> None:
    stack = h.stack()
    stack.upstream.hang = True
    client = h.client(stack, unique("cam"))
    errors: List[BridgeRequestError] = []

    def call() -> None:
        try:
            client.chat(ask("still waiting"))
        except BridgeRequestError as err:
            errors.append(err)

    thread = threading.Thread(target=call)
    thread.start()
    stack.upstream.wait_for(lambda calls: len(calls) == 1)
    client.close()
    thread.join(5)
    assert [e.code for e in errors] == ["closed"]
    with pytest.raises(BridgeRequestError) as after:
        client.chat(ask("after close"))
    assert after.value.code == "closed"


def test_a_full_offline_buffer_fails_at_once_with_offline(h: Harness) -> None:
    stack = h.stack("external")
    mosquitto = stack.mosquitto
    assert mosquitto is not None

    async def run() -> Tuple[dict, BridgeRequestError, float]:
        # attempt_timeout: the bridge may not have subscribed again when the held call goes out.
        options = dict(offline_buffer=1, attempt_timeout=1.0, connect_timeout=10)
        client = h.track(await AsyncBridgeClient.connect(stack.url, unique("cam"), **options))
        mosquitto.kill()
        await wait_until(lambda: not client.connected)
        held = asyncio.ensure_future(client.chat(ask("held while offline"), timeout=20))
        await asyncio.sleep(0)  # the held call is submitted
        started = time.monotonic()
        with pytest.raises(BridgeRequestError) as refused:
            await client.chat(ask("one too many"))
        refused_after = time.monotonic() - started
        mosquitto.start()
        return await held, refused.value, refused_after

    held, refused, refused_after = asyncio.run(run())
    assert held["content"] == "echo: held while offline"
    assert refused.code == "offline" and refused_after < 0.5


async def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)
