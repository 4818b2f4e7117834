"""The client's options, their defaults and the contract's names (docs/clients.md lists them
for users). A wrong option fails ``connect`` at once with a ``ValueError`` naming it, rather than
as a refusal from the bridge much later."""
from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Optional
from urllib.parse import urlsplit

PRIORITIES = ("critical", "high", "normal", "low")
DEVICE_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
TEMPLATE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
DEFAULT_PORTS = {"mqtt": 1883, "mqtts": 8883}


@dataclass(frozen=True)
class Settings:
    """Everything the client needs of its options, checked once; times are in seconds."""

    host: str
    port: int
    tls: bool
    device_id: str
    client_id: str
    username: Optional[str] = None
    password: Optional[str] = None
    ca: Optional[str] = None
    cert: Optional[str] = None
    key: Optional[str] = None
    protocol: int = 5
    keepalive: int = 30
    connect_timeout: float = 30.0
    max_in_flight: int = 100
    offline_buffer: int = 100
    timeout: float = 60.0
    attempt_timeout: float = 20.0
    max_attempts: int = 8
    priority: str = "normal"
    qos: int = 1

    @property
    def rpc_suffix(self) -> str:
        """The client id's part after the device id and its ``.``; ``client`` when there is none."""
        return self.client_id[len(self.device_id) + 1 :] or "client"


def settings_of(url: str, device_id: str, client_id: Optional[str] = None, **options: object) -> Settings:
    """The settings for ``connect``'s arguments, with the defaults of docs/clients.md."""
    if not isinstance(device_id, str) or not DEVICE_ID.fullmatch(device_id):
        raise ValueError("device_id must be 1 to 64 characters of A-Za-z0-9_-")
    client_id = client_id if client_id is not None else f"{device_id}.c{secrets.token_hex(4)}"
    if client_id != device_id and not client_id.startswith(device_id + "."):
        raise ValueError(f'client_id must be "{device_id}" or begin with "{device_id}."')
    host, port, tls = parse_url(url)
    settings = Settings(host=host, port=port, tls=tls, device_id=device_id, client_id=client_id, **options)  # type: ignore[arg-type]
    check(settings)
    return settings


def parse_url(url: str) -> tuple[str, int, bool]:
    """``mqtt://host:port`` or ``mqtts://host:port`` (TLS) as host, port and whether TLS."""
    parts = urlsplit(url)
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"url must be mqtt://host:port or mqtts://host:port, not {url!r}")
    return parts.hostname, parts.port or DEFAULT_PORTS[parts.scheme], parts.scheme == "mqtts"


def check(settings: Settings) -> None:
    """Raises ValueError naming the first option out of its range."""
    for name in ("keepalive", "connect_timeout", "max_in_flight", "timeout", "attempt_timeout", "max_attempts"):
        if not getattr(settings, name) > 0:
            raise ValueError(f"{name} must be a positive number")
    if not (isinstance(settings.offline_buffer, int) and settings.offline_buffer >= 0):
        raise ValueError("offline_buffer must be an integer >= 0")
    if settings.qos not in (0, 1, 2):
        raise ValueError("qos must be 0, 1 or 2")
    if settings.protocol not in (4, 5):
        raise ValueError("protocol must be 4 (MQTT 3.1.1) or 5 (MQTT 5)")
    if re.search(r"[/+#]", settings.rpc_suffix):
        raise ValueError("client_id must not hold /, + or # after the device id: it names a topic")
    check_priority(settings.priority)


def check_priority(priority: str) -> str:
    """A priority outside the contract's four would be refused by the bridge: say so at the call."""
    if priority not in PRIORITIES:
        raise ValueError(f"priority must be one of {', '.join(PRIORITIES)}")
    return priority


def check_request_id(request_id: object) -> str:
    """The caller's own id, which must be a valid request id since it names the call's replies."""
    if not isinstance(request_id, str) or not REQUEST_ID.fullmatch(request_id):
        raise ValueError("id must be 1 to 64 characters of A-Za-z0-9._:-")
    return request_id


class Topics:
    """The device's topics (docs/CONTRACT.md, "Topics"), built in one place."""

    def __init__(self, settings: Settings) -> None:
        device = settings.device_id
        self.result = f"devices/{device}/result"
        self.stream = f"devices/{device}/stream"
        self.rpc = f"devices/{device}/rpc/{settings.rpc_suffix}"
        self._device = device

    def infer(self, priority: str) -> str:
        return f"devices/{self._device}/infer/{priority}"

    def image(self, priority: str, template: str, request_id: str) -> str:
        return f"devices/{self._device}/image/{priority}/{template}/{request_id}"
