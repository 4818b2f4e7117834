"""The real processes the tests run: the bridge (node dist/bridge/main.js), a Mosquitto of
its own for the plant's-broker mode, and a Redis for the restart test. Each on free ports of
its own (never 1883), each stopped by the fixture that started it, also when a test fails."""
from __future__ import annotations

import getpass
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional

MAIN = Path(__file__).resolve().parents[3]
BRIDGE_MAIN = MAIN / "dist" / "bridge" / "main.js"
MOSQUITTO = next((p for p in ("/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto") if Path(p).exists()), "mosquitto")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"{what} not listening on {port} within {timeout} s")


def stop(proc: Optional[subprocess.Popen], sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Bridge:
    """One bridge process; ``env`` adds to the tests' defaults. Its pino lines are kept for
    failure messages; ``mqtt_port`` is the embedded broker's (None in external mode)."""

    DEFAULTS = {
        "MQTT_PORT": "0",
        "HTTP_PORT": "0",
        "LOG_LEVEL": "info",
        "OVERLOAD_DELAY_MS": "0",
        "DEVICE_RATE_LIMIT_RPM": "100000",
        "SHUTDOWN_GRACE_MS": "300",
    }

    def __init__(self, upstream_url: str, env: Dict[str, str]) -> None:
        if not BRIDGE_MAIN.exists():
            raise RuntimeError(f"{BRIDGE_MAIN} is missing: run `npm run build` in {MAIN}")
        self.env = {"PATH": os.environ.get("PATH", ""), **self.DEFAULTS, "UPSTREAM_URL": upstream_url, **env}
        self.lines: List[str] = []
        self.mqtt_port: Optional[int] = None
        self.proc: Optional[subprocess.Popen] = None
        self.start()

    def start(self, timeout: float = 20.0) -> None:
        self.proc = subprocess.Popen(
            ["node", str(BRIDGE_MAIN)], env=self.env, cwd=str(MAIN), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        ready = threading.Event()
        threading.Thread(target=self._read, args=(self.proc, ready), daemon=True).start()
        if not ready.wait(timeout) or self.proc.poll() is not None:
            stop(self.proc, signal.SIGKILL)
            raise RuntimeError("the bridge did not get ready:\n" + self.log_tail())

    def _read(self, proc: subprocess.Popen, ready: threading.Event) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.lines.append(line)
            if '"msg":"bridge ready"' in line:
                self.mqtt_port = json.loads(line).get("mqttPort")
                ready.set()
        ready.set()  # exited: start() sees it

    def kill(self) -> None:
        stop(self.proc, signal.SIGKILL)

    def stop(self) -> None:
        stop(self.proc)

    def log_tail(self, n: int = 40) -> str:
        return "\n".join(self.lines[-n:])


class Mosquitto:
    """The plant's broker: a Mosquitto on a free port, without persistence, anonymous unless
    ``allow_anonymous`` is false (then, with no users, it refuses every login)."""

    def __init__(self, allow_anonymous: bool = True) -> None:
        self.dir = tempfile.mkdtemp(prefix="eab-py-mosquitto-")
        self.port = free_port()
        self.proc: Optional[subprocess.Popen] = None
        conf = Path(self.dir, "mosquitto.conf")
        lines = [f"listener {self.port} 127.0.0.1", f"allow_anonymous {str(allow_anonymous).lower()}", "persistence false", "log_dest stderr"]
        if os.geteuid() == 0:  # as root it would drop to user "mosquitto"
            lines.insert(0, f"user {getpass.getuser()}")
        conf.write_text("\n".join(lines) + "\n")
        self.conf = str(conf)
        self.log = Path(self.dir, "mosquitto.log")
        self.start()

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([MOSQUITTO, "-c", self.conf], stdout=subprocess.DEVNULL, stderr=log)
        wait_port(self.port, 10, self.proc, "mosquitto")

    def kill(self) -> None:
        stop(self.proc, signal.SIGKILL)

    def close(self) -> None:
        stop(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)


class Redis:
    """A Redis of the test's own: no persistence, and the eviction policy the bridge requires."""

    def __init__(self) -> None:
        self.port = free_port()
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        args += ["--maxmemory-policy", "noeviction"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, 10, self.proc, "redis-server")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def close(self) -> None:
        stop(self.proc)
