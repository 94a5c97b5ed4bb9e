"""Receivers for the outbound tests and bench: real TCP servers on 127.0.0.1 that answer badly on purpose (a byte
a second, an answer far larger than anyone should read, a redirect), each recording what happened to it."""
from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Visit:
    request: bytes = b""
    sent: int = 0  # bytes of the answer the client took before it closed or the answer ended
    cut_off: bool = False  # the client closed before the whole answer was sent
    done: threading.Event = field(default_factory=threading.Event)


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(rest) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        rest += chunk
    return head + b"\r\n\r\n" + rest


class RawReceiver:
    """Serves each connection with ``answer(conn, visit)`` in a thread of its own; ``visits`` in arrival order."""

    def __init__(self, answer: Callable[[socket.socket, Visit], None]) -> None:
        self.visits: list[Visit] = []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._answer = answer
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            visit = Visit()
            self.visits.append(visit)
            threading.Thread(target=self._handle, args=(conn, visit), daemon=True).start()

    def _handle(self, conn: socket.socket, visit: Visit) -> None:
        try:
            visit.request = _read_request(conn)
            self._answer(conn, visit)
        except OSError:
            visit.cut_off = True
        finally:
            conn.close()
            visit.done.set()

    def close(self) -> None:
        self.server.close()


def send_all(conn: socket.socket, visit: Visit, data: bytes) -> None:
    conn.sendall(data)
    visit.sent += len(data)


def trickle(every_s: float = 1.0, pad: int = 40) -> Callable[[socket.socket, Visit], None]:
    """A valid 200 answer whose header arrives one byte every ``every_s`` seconds (``pad`` bytes of padding)."""
    answer = b"HTTP/1.1 200 OK\r\nX-Pad: " + b"x" * pad + b"\r\nContent-Length: 2\r\n\r\nok"

    def serve(conn: socket.socket, visit: Visit) -> None:
        for byte in answer:
            send_all(conn, visit, bytes([byte]))
            time.sleep(every_s)

    return serve


def huge(total: int) -> Callable[[socket.socket, Visit], None]:
    """A 200 answer of ``total`` bytes, sent as fast as the client reads."""
    def serve(conn: socket.socket, visit: Visit) -> None:
        send_all(conn, visit, f"HTTP/1.1 200 OK\r\nContent-Length: {total}\r\n\r\n".encode())
        block = b"x" * 65536
        left = total
        while left:
            send_all(conn, visit, block[:min(left, len(block))])
            left -= min(left, len(block))

    return serve


def fixed(status: str, headers: str = "", body: bytes = b"") -> Callable[[socket.socket, Visit], None]:
    def serve(conn: socket.socket, visit: Visit) -> None:
        send_all(conn, visit, f"HTTP/1.1 {status}\r\n{headers}Content-Length: {len(body)}\r\n\r\n".encode() + body)

    return serve
