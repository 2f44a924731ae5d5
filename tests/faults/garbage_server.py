"""A server on 127.0.0.1 that answers every request with HTTP 200 and bytes that are no protocol's."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GARBAGE = b"\x00\xff<html>\x1b[2J not json \xfe\xfd</html>"


class _Handler(BaseHTTPRequestHandler):
    def _garbage(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(GARBAGE)))
        self.end_headers()
        self.wfile.write(GARBAGE)

    do_GET = do_POST = _garbage  # http.server calls them by these names

    def log_message(self, *args: object) -> None:
        pass


class GarbageServer:
    """Started with :meth:`start` on a free port; :attr:`url` ends in ``/v1``; stopped by :meth:`stop`."""

    def __init__(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> GarbageServer:
        threading.Thread(target=self._server.serve_forever, name="garbage-server", daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
