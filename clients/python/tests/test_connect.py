"""``connect``: a refused login fails at once with the broker's reason, and a broker that is
not there fails once ``connect_timeout`` has passed, both as BridgeConnectError; ``mqtts://``
with a CA and a client certificate (mTLS)."""
from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Dict, Iterator

import pytest

from edge_ai_bridge import BridgeClient, BridgeConnectError
from fake_upstream import answer_to
from harness import Harness, ask
from processes import Mosquitto, free_port


@pytest.fixture
def closed_broker() -> Iterator[Mosquitto]:
    mosquitto = Mosquitto(allow_anonymous=False)
    yield mosquitto
    mosquitto.close()


@pytest.mark.parametrize("protocol, code", [(5, 0x87), (4, 5)])
def test_a_refused_login_fails_at_once_with_the_brokers_reason(closed_broker: Mosquitto, protocol: int, code: int) -> None:
    started = time.monotonic()
    with pytest.raises(BridgeConnectError) as err:
        BridgeClient.connect(closed_broker.url, "cam-1", protocol=protocol, connect_timeout=10)
    assert err.value.reason_code == code
    assert "not auth" in str(err.value).lower()
    assert time.monotonic() - started < 2


def test_no_broker_fails_after_connect_timeout() -> None:
    started = time.monotonic()
    with pytest.raises(BridgeConnectError) as err:
        BridgeClient.connect(f"mqtt://127.0.0.1:{free_port()}", "cam-1", connect_timeout=0.5)
    assert err.value.reason_code is None
    assert 0.5 <= time.monotonic() - started < 2


def test_mqtts_with_a_client_certificate(h: Harness, tmp_path: Path) -> None:
    pki = make_pki(tmp_path, client_cn="cam-tls")
    port = free_port()
    env = {"MQTT_TLS_PORT": str(port), "TLS_CERT_FILE": pki["server.crt"], "TLS_KEY_FILE": pki["server.key"], "TLS_CA_FILE": pki["ca.crt"]}
    stack = h.stack(env=env)
    options = dict(ca=pki["ca.crt"], cert=pki["client.crt"], key=pki["client.key"], connect_timeout=10)
    client = h.track(BridgeClient.connect(f"mqtts://127.0.0.1:{port}", "cam-tls", **options))
    assert client.chat(ask("over TLS"))["content"] == answer_to("over TLS")


def make_pki(directory: Path, client_cn: str) -> Dict[str, str]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate (mTLS), by openssl."""

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    def signed(name: str, subject: str, extensions: str) -> None:
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject)
        (directory / f"{name}.ext").write_text(extensions + "\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext")

    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=test-ca")
    signed("server", "/CN=localhost", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth")
    signed("client", f"/CN={client_cn}", "extendedKeyUsage=clientAuth")
    return {name: str(directory / name) for name in ("ca.crt", "server.crt", "server.key", "client.crt", "client.key")}
