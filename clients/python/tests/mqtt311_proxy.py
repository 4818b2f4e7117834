"""A broker that speaks only MQTT 3.1.1, made from a real one: a TCP proxy that answers an
MQTT 5 CONNECT with CONNACK 1 (unacceptable protocol version), as such a broker does, and
pipes every other connection to the real broker."""
from __future__ import annotations

import socket
import threading
from typing import List


def read_exactly(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        more = conn.recv(n - len(data))
        if not more:
            raise ConnectionError("closed")
        data += more
    return data


def read_packet(conn: socket.socket) -> bytes:
    """One MQTT packet: its fixed header (type, remaining length) and its body."""
    head = read_exactly(conn, 1)
    length, shift = 0, 0
    while True:
        byte = read_exactly(conn, 1)
        head += byte
        length |= (byte[0] & 0x7F) << shift
        shift += 7
        if not byte[0] & 0x80:
            break
    return head + read_exactly(conn, length)


class Mqtt311OnlyProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.refused_mqtt5 = 0
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._open: List[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            self._open.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            connect = read_packet(conn)
        except (ConnectionError, OSError):
            return conn.close()
        body = connect[connect.index(b"MQTT") :]
        if body[4] == 5:  # the protocol level after the protocol name
            self.refused_mqtt5 += 1
            conn.sendall(b"\x20\x02\x00\x01")
            return conn.close()
        broker = socket.create_connection(("127.0.0.1", self.target_port))
        self._open.append(broker)
        broker.sendall(connect)
        threading.Thread(target=self._pipe, args=(broker, conn), daemon=True).start()
        self._pipe(conn, broker)

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self._server.close()
        for conn in self._open:
            conn.close()
