"""The MQTT connection, on paho-mqtt 1.6 or 2.x: MQTT 5 unless told otherwise, and 3.1.1 when
the broker refuses 5; one reply subscription (plus the stream topic once a stream is asked
for), renewed on every reconnect, which paho makes by itself on its network thread.

The link never holds a lock while it calls paho, and hands every event to the core without
holding one either: paho calls ``on_publish`` with its own lock held, so a lock taken both
around paho calls and inside paho callbacks could deadlock the two threads."""
from __future__ import annotations

import functools
import logging
import socket
import ssl
import threading
import time
from typing import Callable, Dict, List, Optional, Protocol, TypeVar

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from .errors import BridgeConnectError
from .options import Settings, Topics
from .payloads import Outgoing

log = logging.getLogger("edge_ai_bridge")

#: CONNACK codes meaning "not this protocol version": 3.1.1's 1 (paho reports it as 0x84 on
#: an MQTT 5 connection) and MQTT 5's 0x84 Unsupported Protocol Version.
PROTOCOL_REFUSED = frozenset({1, 0x84})
#: paho's reconnect delay doubles from the first to the second while the broker stays away.
RECONNECT_MIN_S, RECONNECT_MAX_S = 0.5, 10.0

F = TypeVar("F", bound=Callable[..., None])


class Handlers(Protocol):
    """What the link tells the client core, each from paho's network thread."""

    def on_up(self, with_stream: bool) -> None: ...

    def on_down(self) -> None: ...

    def on_stream_ready(self) -> None: ...

    def on_puback(self, mid: int) -> None: ...

    def on_reply(self, payload: bytes, correlation: Optional[bytes]) -> None: ...

    def on_chunk(self, payload: bytes) -> None: ...


def guarded(fn: F) -> F:
    """A paho callback that raises stops paho's network thread for good: log it instead."""

    @functools.wraps(fn)
    def wrapper(*args: object) -> None:
        try:
            fn(*args)
        except Exception:
            log.exception("%s failed", fn.__name__)

    return wrapper  # type: ignore[return-value]


def reason_value(code: object) -> int:
    """A CONNACK or SUBACK code as a number, whether paho gives an int or a ReasonCodes object."""
    return int(getattr(code, "value", code))  # type: ignore[call-overload]


class _Opening:
    """The outcome of the first connection, which ``open()`` waits for."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.error: Optional[BridgeConnectError] = None

    def fail(self, error: BridgeConnectError) -> None:
        self.error = error
        self.done.set()


class MqttLink:
    """One paho client and its subscriptions, for one client core."""

    def __init__(self, settings: Settings, topics: Topics, handlers: Handlers) -> None:
        self._settings = settings
        self._topics = topics
        self._handlers = handlers
        self.protocol = settings.protocol
        self._stream_wanted = False
        self._client: Optional[mqtt.Client] = None
        self._opening: Optional[_Opening] = None
        self._closing = False
        self._lock = threading.Lock()  # guards the two dicts below; never held around paho
        self._subscriptions: Dict[int, str] = {}  # SUBSCRIBE mid -> "up", "up+stream" or "stream"
        self._early_subacks: Dict[int, List[int]] = {}  # SUBACKs that beat their mid's record

    @property
    def reply_topic(self) -> str:
        """MQTT 5: this connection's own Response Topic; 3.1.1: the device's result topic."""
        return self._topics.rpc if self.protocol == 5 else self._topics.result

    def open(self) -> None:
        """Connects and subscribes, or raises BridgeConnectError within ``connect_timeout``."""
        deadline = time.monotonic() + self._settings.connect_timeout
        try:
            self._open(deadline)
        except BridgeConnectError as err:
            if self.protocol != 5 or err.reason_code not in PROTOCOL_REFUSED:
                raise
            log.info("the broker refused MQTT 5, connecting with MQTT 3.1.1")
            self.protocol = 4
            self._open(deadline)

    def _open(self, deadline: float) -> None:
        client = self._new_client()
        opening = self._opening = _Opening()
        self._client = client
        s = self._settings
        clean = {"clean_start": True} if self.protocol == 5 else {}
        client.connect_async(s.host, s.port, int(s.keepalive), **clean)
        client.loop_start()
        if not opening.done.wait(max(0.0, deadline - time.monotonic())):
            opening.fail(BridgeConnectError(f"no connection to {s.host}:{s.port} within {s.connect_timeout:g} s"))
        self._opening = None
        if opening.error is not None:
            self._stop(client)
            raise opening.error

    def _new_client(self) -> mqtt.Client:
        s = self._settings
        kwargs: Dict[str, object] = {"client_id": s.client_id}
        if self.protocol == 5:
            kwargs["protocol"] = mqtt.MQTTv5
        else:
            kwargs.update(protocol=mqtt.MQTTv311, clean_session=True)
        api = getattr(mqtt, "CallbackAPIVersion", None)  # paho 2.x asks which callbacks we speak
        if api is not None:
            kwargs["callback_api_version"] = api.VERSION1
        client = mqtt.Client(**kwargs)
        client.reconnect_delay_set(RECONNECT_MIN_S, RECONNECT_MAX_S)
        if s.username is not None:
            client.username_pw_set(s.username, s.password)
        if s.tls:
            # paho 1.6's default, ssl.PROTOCOL_TLS, is deprecated; this one also checks the host name.
            client.tls_set(ca_certs=s.ca, certfile=s.cert, keyfile=s.key, tls_version=ssl.PROTOCOL_TLS_CLIENT)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_subscribe = self._on_subscribe
        client.on_publish = self._on_publish
        client.on_message = self._on_message
        return client

    def publish(self, out: Outgoing) -> int:
        """Publishes one attempt at the client's QoS (1 by default) and returns its message id. While the connection is
        down paho keeps it and sends it on reconnect."""
        assert self._client is not None
        properties = None
        if self.protocol == 5:
            properties = Properties(PacketTypes.PUBLISH)
            properties.ResponseTopic = self._topics.rpc
            properties.CorrelationData = out.correlation
            if out.user_properties:
                properties.UserProperty = out.user_properties
            if out.expiry_seconds is not None:
                properties.MessageExpiryInterval = out.expiry_seconds
        return self._client.publish(out.topic, out.payload, qos=self._settings.qos, properties=properties).mid

    def want_stream(self) -> None:
        """Adds the stream topic to the subscriptions (once); ``on_stream_ready`` says when."""
        with self._lock:
            if self._stream_wanted:
                return
            self._stream_wanted = True
        client = self._client
        if client is None or not client.is_connected():
            return  # the next connection subscribes to it with the reply topic
        rc, mid = client.subscribe(self._topics.stream, qos=1)
        if rc == mqtt.MQTT_ERR_SUCCESS:
            self._record_subscription(mid, "stream")

    def close(self) -> None:
        self._closing = True
        if self._client is not None:
            self._stop(self._client)

    @staticmethod
    def _stop(client: mqtt.Client) -> None:
        client.disconnect()
        client.loop_stop()

    def _record_subscription(self, mid: int, kind: str) -> None:
        with self._lock:
            codes = self._early_subacks.pop(mid, None)
            if codes is None:
                self._subscriptions[mid] = kind
        if codes is not None:
            self._subscribed(kind, codes)

    @guarded
    def _on_connect(self, client: mqtt.Client, userdata: object, flags: object, rc: object, *properties: object) -> None:
        code = reason_value(rc)
        if code != 0:
            self._refused(code, str(rc) if self.protocol == 5 else mqtt.connack_string(code))
            return
        no_delay(client)
        with self._lock:
            with_stream = self._stream_wanted
        topics = [self.reply_topic] + ([self._topics.stream] if with_stream else [])
        result, mid = client.subscribe([(topic, 1) for topic in topics])
        if result == mqtt.MQTT_ERR_SUCCESS:
            self._record_subscription(mid, "up+stream" if with_stream else "up")

    def _refused(self, code: int, reason: str) -> None:
        error = BridgeConnectError(f"the broker refused the connection: {reason}", code)
        if self._opening is not None:
            self._opening.fail(error)
        else:
            log.warning("reconnect refused (%s); paho tries again", reason)

    @guarded
    def _on_subscribe(self, client: mqtt.Client, userdata: object, mid: int, granted: object, *properties: object) -> None:
        codes = [reason_value(code) for code in granted]  # type: ignore[attr-defined]
        with self._lock:
            kind = self._subscriptions.pop(mid, None)
            if kind is None:
                self._early_subacks[mid] = codes
        if kind is not None:
            self._subscribed(kind, codes)

    def _subscribed(self, kind: str, codes: List[int]) -> None:
        if any(code >= 0x80 for code in codes):
            error = BridgeConnectError(f"the broker refused the subscription ({kind}): reason codes {codes}")
            if self._opening is not None:
                self._opening.fail(error)
            else:
                log.error("%s", error)
            return
        if kind == "stream":
            self._handlers.on_stream_ready()
            return
        self._handlers.on_up(with_stream=kind == "up+stream")
        if self._opening is not None:
            self._opening.done.set()

    @guarded
    def _on_disconnect(self, client: mqtt.Client, userdata: object, rc: object, *properties: object) -> None:
        if self._closing:
            return
        reason = mqtt.error_string(rc) if isinstance(rc, int) else str(rc)
        log.warning("connection lost (%s); reconnecting", reason)
        self._handlers.on_down()

    @guarded
    def _on_publish(self, client: mqtt.Client, userdata: object, mid: int, *rest: object) -> None:
        self._handlers.on_puback(mid)

    @guarded
    def _on_message(self, client: mqtt.Client, userdata: object, message: mqtt.MQTTMessage) -> None:
        if message.topic == self.reply_topic:
            properties = getattr(message, "properties", None)
            correlation = getattr(properties, "CorrelationData", None) if self.protocol == 5 else None
            self._handlers.on_reply(message.payload, correlation)
        elif message.topic == self._topics.stream:
            self._handlers.on_chunk(message.payload)


def no_delay(client: mqtt.Client) -> None:
    """Nagle's algorithm with delayed ACKs holds each small request ~40 ms; paho leaves it on."""
    sock = client.socket()
    try:
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        pass  # not a TCP socket (a websocket wrapper): nothing to turn off
