"""Retries keep the guarantees: every attempt of a call publishes its one request id, so the
upstream is called once however often the device asks (guarantee 2), and a refusal's
``retry_after_ms`` is waited out before the next attempt. A spy connection of the same device
sees what the client published, and when."""
from __future__ import annotations

import threading
from typing import Dict

import pytest

from fake_upstream import answer_to
from harness import Harness, ask, unique


@pytest.mark.parametrize("protocol", [5, 4])
def test_a_retry_after_an_attempt_timeout_reuses_the_id_and_the_upstream_is_called_once(
    h: Harness, mode: str, protocol: int
) -> None:
    stack = h.stack(mode)
    stack.upstream.delay = 1.5
    device = unique("cam")
    spy = h.spy(stack, device)
    client = h.client(stack, device, protocol=protocol, attempt_timeout=0.4)
    prompt = unique("slow question")

    reply = client.chat(ask(prompt), timeout=10)

    assert reply["content"] == answer_to(prompt)
    assert [c.prompt for c in stack.upstream.chat_calls()] == [prompt]
    assert len(spy.publishes(reply["id"])) >= 2


def test_retry_after_ms_is_waited_out_before_the_next_attempt(h: Harness, mode: str) -> None:
    # One upstream call at a time and room for one queued request: with A running and B
    # queued, C is refused queue_full with retry_after_ms 1000 (a running request does not
    # count in QUEUE_MAX; found by experiment). A and B take 0.6 s each, so the retry after
    # 1 to 1.2 s is admitted. The spy sees B before the bridge may have admitted it (a plant's
    # broker forwards it at once), so B and C may swap: exactly one of them is refused.
    stack = h.stack(mode, {"QUEUE_MAX": "1", "MAX_CONCURRENCY": "1"})
    stack.upstream.delay = 0.6
    device = unique("cam")
    spy = h.spy(stack, device)
    client = h.client(stack, device)
    replies: Dict[str, dict] = {}

    def call(name: str) -> None:
        replies[name] = client.chat(ask(f"{name} {device}"), timeout=15)

    def start(name: str) -> threading.Thread:
        thread = threading.Thread(target=call, args=(name,))
        thread.start()
        return thread

    threads = [start("A")]
    stack.upstream.wait_for(lambda calls: len(calls) == 1)  # A runs
    threads.append(start("B"))
    spy.wait_for(lambda: any(s.payload.get("messages", [{}])[0].get("content") == f"B {device}" for s in spy.seen))
    threads.append(start("C"))
    for thread in threads:
        thread.join(20)

    assert {name: r["content"] for name, r in replies.items()} == {n: answer_to(f"{n} {device}") for n in "ABC"}
    # B or C, whichever the bridge admitted second, was refused once, and asked again after the wait.
    refusals = [r for reply in replies.values() for r in spy.replies(reply["id"]) if r.payload["ok"] is False]
    assert [r.payload["error"]["code"] for r in refusals] == ["queue_full"]
    [refusal] = refusals
    retry_after = refusal.payload["error"]["retry_after_ms"] / 1000
    [retry, *_] = [p for p in spy.publishes(refusal.payload["id"]) if p.time > refusal.time]
    assert retry.time - refusal.time >= retry_after - 0.05
    assert sorted(c.prompt for c in stack.upstream.chat_calls()) == [f"{n} {device}" for n in "ABC"]
