"""The client's pure rules, alone: how chunks become events (the contract's promise kept when
chunks are lost), and how long a refused call waits."""
from __future__ import annotations

from typing import List

import pytest

from edge_ai_bridge.backoff import retry_wait
from edge_ai_bridge.errors import BridgeRequestError
from edge_ai_bridge.streams import Event, StreamAssembler

RESET = {"reset": True}


def feed(chunks: List[dict], content: str) -> List[Event]:
    assembler = StreamAssembler()
    events: List[Event] = []
    for chunk in chunks:
        events += assembler.chunk(chunk["seq"], chunk.get("delta"), chunk.get("reset", False))
    return events + assembler.finish(content)


def text_after_last_reset(events: List[Event]) -> str:
    last = max((i for i, e in enumerate(events) if e == RESET), default=-1)
    return "".join(e["delta"] for e in events[last + 1 :])


def test_chunks_that_add_up_to_the_reply_need_no_mending() -> None:
    events = feed([{"seq": 0, "delta": "The belt "}, {"seq": 1, "delta": "runs."}], "The belt runs.")
    assert events == [{"delta": "The belt "}, {"delta": "runs."}]


def test_a_missed_chunk_ends_with_a_reset_and_the_whole_content() -> None:
    events = feed([{"seq": 0, "delta": "The belt "}, {"seq": 2, "delta": "fast."}], "The belt runs fast.")
    assert events[-2:] == [RESET, {"delta": "The belt runs fast."}]
    assert text_after_last_reset(events) == "The belt runs fast."


def test_a_missed_reset_is_mended_too() -> None:
    chunks = [{"seq": 0, "delta": "Broken "}, {"seq": 2, "delta": "The belt runs."}]
    assert text_after_last_reset(feed(chunks, "The belt runs.")) == "The belt runs."
    assert feed(chunks, "The belt runs.")[-2:] == [RESET, {"delta": "The belt runs."}]


def test_a_reset_and_a_run_again_from_seq_0_start_the_text_afresh() -> None:
    chunks = [{"seq": 0, "delta": "Fir"}, {"seq": 1, "reset": True}, {"seq": 2, "delta": "Second"}, {"seq": 0, "delta": "Third"}]
    events = feed(chunks, "Third")
    assert events == [{"delta": "Fir"}, RESET, {"delta": "Second"}, RESET, {"delta": "Third"}]


def test_duplicates_are_ignored_and_a_reply_without_chunks_is_one_delta() -> None:
    chunks = [{"seq": 0, "delta": "Hi"}, {"seq": 1, "delta": "!"}, {"seq": 1, "delta": "!"}]
    assert feed(chunks, "Hi!") == [{"delta": "Hi"}, {"delta": "!"}]
    assert feed([], "From the cache.") == [{"delta": "From the cache."}]
    assert feed([], "") == []


def test_retry_after_ms_is_honoured_with_up_to_20_percent_more() -> None:
    assert retry_wait(1000, 1, random=lambda: 0.0) == pytest.approx(1.0)
    assert retry_wait(1000, 1, random=lambda: 1.0) == pytest.approx(1.2)


def test_without_retry_after_ms_the_backoff_doubles_up_to_30_s_with_jitter() -> None:
    assert [retry_wait(None, n, random=lambda: 1.0) for n in (1, 2, 3)] == [0.5, 1.0, 2.0]
    assert retry_wait(None, 1, random=lambda: 0.0) == 0.25
    assert retry_wait(None, 50, random=lambda: 1.0) == 30.0


def test_an_error_reply_is_untrusted_input() -> None:
    error = BridgeRequestError.from_reply({"id": "r1", "ok": False, "error": "nonsense"}, "r1", 1)
    assert (error.code, error.retry_after_ms) == ("internal", None)
    reply = {"id": "r1", "ok": False, "error": {"code": "queue_full", "message": "full", "retry_after_ms": 1000}}
    error = BridgeRequestError.from_reply(reply, "r1", 2)
    assert (error.code, str(error), error.retry_after_ms, error.attempts, error.reply) == ("queue_full", "full", 1000, 2, reply)
