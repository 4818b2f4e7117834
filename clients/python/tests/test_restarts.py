"""A broker restarted with requests in flight: every call still ends with exactly one reply,
its own. The plant's Mosquitto killed (SIGKILL) and started again on its port, with twenty
requests waiting on a slow upstream; and the bridge itself killed and started again on the
same MQTT port and Redis, whose jobs the restarted bridge takes over (guarantee 1)."""
from __future__ import annotations

import threading
from typing import Callable, List

from fake_upstream import answer_to
from harness import Harness, Stack, ask, unique
from processes import free_port

CALLS = 20


def run_through(h: Harness, stack: Stack, restart: Callable[[], None], timeout: float) -> List[object]:
    """Twenty calls with ids of their own, the broker restarted once they all reached the
    upstream; each call's one result, checked against its request."""
    device = unique("cam")
    # A reply published while the client was away is asked for again after attempt_timeout.
    client = h.client(stack, device, attempt_timeout=2.0)
    ids = [f"{device}-{i}" for i in range(CALLS)]
    prompts = [f"restart question {request_id}" for request_id in ids]
    results: List[object] = []
    batch = threading.Thread(
        target=lambda: results.extend(client.batch([ask(p, id=i) for p, i in zip(prompts, ids)], concurrency=CALLS, timeout=timeout))
    )
    batch.start()
    stack.upstream.wait_for(lambda calls: len(calls) == CALLS)
    restart()
    batch.join(timeout + 5)
    assert [r["id"] if isinstance(r, dict) else r for r in results] == ids
    assert [r["content"] for r in results] == [answer_to(p) for p in prompts]  # type: ignore[index]
    return prompts  # type: ignore[return-value]


def test_every_call_is_answered_once_across_a_restart_of_the_plants_broker(h: Harness) -> None:
    stack = h.stack("external")
    stack.upstream.delay = 1.5
    mosquitto = stack.mosquitto
    assert mosquitto is not None

    def restart() -> None:
        mosquitto.kill()
        mosquitto.start()

    prompts = run_through(h, stack, restart, timeout=30)
    assert sorted(c.prompt for c in stack.upstream.chat_calls()) == sorted(prompts)


def test_every_call_is_answered_once_across_a_restart_of_the_bridge_on_redis(h: Harness) -> None:
    redis = h.redis()
    env = {
        "MQTT_PORT": str(free_port()),
        "REDIS_URL": redis.url,
        "REDIS_PREFIX": unique("eab-py"),
        "UPSTREAM_TIMEOUT_MS": "3000",  # the restarted bridge takes the jobs over 3 s + 3 s on
    }
    stack = h.stack("embedded", env)
    stack.upstream.delay = 1.5

    def restart() -> None:
        stack.bridge.kill()
        stack.bridge.start()

    run_through(h, stack, restart, timeout=40)
