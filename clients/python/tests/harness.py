"""What a test starts, in one place so it is stopped in the right order (clients, spies,
bridges, brokers, Redis, upstreams), also when the test fails: a ``Stack`` is a bridge with its
fake upstream, and in ``external`` mode the Mosquitto it joined, where devices then connect."""
from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

import paho.mqtt.client as mqtt

from edge_ai_bridge import BridgeClient
from fake_upstream import FakeUpstream
from processes import Bridge, Mosquitto, Redis


@dataclass
class Stack:
    upstream: FakeUpstream
    bridge: Bridge
    mosquitto: Optional[Mosquitto]

    @property
    def url(self) -> str:
        return self.mosquitto.url if self.mosquitto else f"mqtt://127.0.0.1:{self.bridge.mqtt_port}"


@dataclass
class Seen:
    time: float
    topic: str
    payload: Dict[str, Any]


class Spy:
    """A second connection of the device (client id ``{device}.spy``) that records every
    request it publishes and every reply it gets, with ``time.monotonic()``: a device may
    subscribe within its own namespace, its infer topics included."""

    def __init__(self, url: str, device: str) -> None:
        self.device = device
        self.seen: List[Seen] = []
        self._changed = threading.Condition()
        subscribed = threading.Event()
        host, port = url.rsplit("/", 1)[1].split(":")
        self._client = mqtt.Client(client_id=f"{device}.spy", clean_session=True, **callback_api())
        self._client.on_message = self._on_message
        self._client.on_connect = lambda c, *_: c.subscribe(f"devices/{device}/#", qos=1)
        self._client.on_subscribe = lambda *_: subscribed.set()
        self._client.connect(host, int(port))
        self._client.loop_start()
        if not subscribed.wait(10):
            raise RuntimeError("the spy did not subscribe")

    def _on_message(self, client: Any, userdata: Any, message: mqtt.MQTTMessage) -> None:
        try:
            payload = json.loads(message.payload)
        except ValueError:
            payload = {}
        with self._changed:
            self.seen.append(Seen(time.monotonic(), message.topic, payload if isinstance(payload, dict) else {}))
            self._changed.notify_all()

    def publishes(self, request_id: str) -> List[Seen]:
        with self._changed:
            return [s for s in self.seen if "/infer/" in s.topic and s.payload.get("id") == request_id]

    def replies(self, request_id: str) -> List[Seen]:
        with self._changed:
            return [s for s in self.seen if s.topic.endswith("/result") and s.payload.get("id") == request_id]

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"spy: condition not met within {timeout} s")
                self._changed.wait(left)

    def close(self) -> None:
        self._client.disconnect()
        self._client.loop_stop()


def callback_api() -> Dict[str, Any]:
    api = getattr(mqtt, "CallbackAPIVersion", None)
    return {"callback_api_version": api.VERSION1} if api is not None else {}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def ask(prompt: str, **fields: Any) -> Dict[str, Any]:
    return {"messages": [{"role": "user", "content": prompt}], **fields}


class Harness:
    """Starts stacks, clients and spies for one test and stops them all at its end."""

    def __init__(self) -> None:
        self.stacks: List[Stack] = []
        self.redises: List[Redis] = []
        self._clients: List[Any] = []
        self._spies: List[Spy] = []

    def stack(self, mode: str = "embedded", env: Optional[Dict[str, str]] = None) -> Stack:
        upstream = FakeUpstream()
        mosquitto: Optional[Mosquitto] = None
        try:
            mosquitto = Mosquitto() if mode == "external" else None
            extra = {"BROKER_URL": mosquitto.url} if mosquitto else {}
            bridge = Bridge(upstream.url, {**extra, **(env or {})})
        except BaseException:
            upstream.close()
            if mosquitto:
                mosquitto.close()
            raise
        stack = Stack(upstream, bridge, mosquitto)
        self.stacks.append(stack)
        return stack

    def redis(self) -> Redis:
        redis = Redis()
        self.redises.append(redis)
        return redis

    def client(self, stack: Stack, device: str, **options: Any) -> BridgeClient:
        client = BridgeClient.connect(stack.url, device, connect_timeout=10, **options)
        return self.track(client)

    def track(self, client: Any) -> Any:
        """Closes this client at the end (an AsyncBridgeClient too: its core is the same)."""
        self._clients.append(client)
        return client

    def spy(self, stack: Stack, device: str) -> Spy:
        spy = Spy(stack.url, device)
        self._spies.append(spy)
        return spy

    def logs(self) -> str:
        return "\n\n".join(f"--- bridge {i} ---\n{s.bridge.log_tail()}" for i, s in enumerate(self.stacks))

    def close(self) -> None:
        for client in self._clients:
            client._core.close()
        for spy in self._spies:
            spy.close()
        for stack in self.stacks:
            stack.bridge.stop()
            if stack.mosquitto:
                stack.mosquitto.close()
            stack.upstream.close()
        for redis in self.redises:
            redis.close()
