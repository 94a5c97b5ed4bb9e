"""A real HTTP server on a free local port, served from a thread, for tests whose other side speaks HTTP."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that keeps its access log out of the test output."""

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002  (the stdlib's name)
        pass


def serve(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, str]:
    """Start ``handler`` on 127.0.0.1 and return the server (the caller shuts it down) and its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"
