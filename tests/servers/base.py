"""What the fake HTTP servers of the tests share: a real server on 127.0.0.1 with injected faults.

Each fake (:mod:`.openai_api`, :mod:`.infinigram_api`) is a :class:`FakeServer` subclass that
says which faults it knows and which :class:`FakeHandler` answers its requests; this module owns
the rest, so the fakes behave alike:

- ``http.server`` in a daemon thread, HTTP/1.1 keep-alive, a deep listen backlog (many clients
  connect at once), started with ``with`` or :meth:`FakeServer.start` on a free port;
- the record of request bodies and of how many requests were being handled at once;
- fault injection: :meth:`FakeServer.inject` queues a :class:`Fault` for the next ``times``
  requests (``-1``: all) whose query text contains ``match``; the handler asks
  :meth:`FakeServer._take_fault` for the fault of each request and acts it out;
- JSON replies that tolerate a client that has already hung up, and dropped connections.

:class:`SilentServer` is the other kind of broken server: it accepts every connection, reads
what comes, and never answers (a process that is stuck, or a port forwarded to nothing).
"""

from __future__ import annotations

import contextlib
import json
import selectors
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, TypeVar

S = TypeVar("S", bound="FakeServer")


@dataclass
class Fault:
    """One injected fault; ``times`` is how many more matching requests it hits (-1: all)."""

    kind: str
    times: int = 1
    match: str | None = None
    status: int = 500
    retry_after: str | None = None
    seconds: float = 1.0
    message: str | None = None

    def headers(self) -> dict[str, str]:
        """The headers of a ``status`` fault's answer: ``Retry-After`` when one was asked for."""
        return {} if self.retry_after is None else {"Retry-After": self.retry_after}


class FakeServer:
    """The shared half of a fake server; subclasses set the class attributes below."""

    fault_kinds: ClassVar[tuple[str, ...]]
    """The fault kinds :meth:`inject` accepts."""
    fault_seconds: ClassVar[float] = 1.0
    """How long a fault that waits (slow, hang, delay) waits unless ``seconds`` is given."""
    handler: ClassVar[type[FakeHandler]]
    """Answers the requests; it reaches this server as ``self.fake``."""
    name: ClassVar[str] = "fake-server"
    """The serving thread's name."""
    path: ClassVar[str] = "/"
    """What :attr:`url` ends in."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        """The JSON body of every request received, in arrival order (faulted ones too)."""
        self.in_flight = 0
        self.max_in_flight = 0
        """The most requests being handled at the same moment."""
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- control ----------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The URL to give the client."""
        assert self._server is not None, "start the server first"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{self.path}"

    @property
    def request_count(self) -> int:
        """How many requests arrived so far."""
        with self._lock:
            return len(self.requests)

    def inject(
        self,
        kind: str,
        *,
        times: int = 1,
        match: str | None = None,
        status: int = 500,
        retry_after: float | str | None = None,
        seconds: float | None = None,
        message: str | None = None,
    ) -> None:
        """Make the next ``times`` matching requests fail with ``kind`` (see the subclass's module doc)."""
        if kind not in self.fault_kinds:
            raise ValueError(f"unknown fault {kind!r}; choose from {self.fault_kinds}")
        header = None if retry_after is None else str(retry_after)
        wait = self.fault_seconds if seconds is None else seconds
        with self._lock:
            self._faults.append(Fault(kind, times, match, status, header, wait, message))

    def clear_faults(self) -> None:
        """Remove every pending fault."""
        with self._lock:
            self._faults.clear()

    def start(self: S) -> S:
        """Listen on a free port of 127.0.0.1 and serve in a daemon thread."""
        handler = type("Handler", (self.handler,), {"fake": self})
        server = _Server(("127.0.0.1", 0), handler)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name=self.name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; handlers that hang are released."""
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self: S) -> S:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- behaviour --------------------------------------------------------------------------------

    def _take_fault(self, query: str) -> Fault | None:
        """The fault for a request whose query text is ``query``, if any (one use of it is spent)."""
        with self._lock:
            for fault in self._faults:
                if fault.times != 0 and (fault.match is None or fault.match in query):
                    if fault.times > 0:
                        fault.times -= 1
                    return fault
            return self._random_fault()

    def _random_fault(self) -> Fault | None:
        """A fault for a request no injected one matched (called under the lock); none by default."""
        return None

    def _record(self, body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(body)

    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # many clients connect at once; the default backlog of 5 stalls them


class FakeHandler(BaseHTTPRequestHandler):
    """Answers one connection's requests for :attr:`fake`; a subclass implements :meth:`post`."""

    protocol_version = "HTTP/1.1"
    fake: FakeServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.fake._enter()
        try:
            self.post(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        finally:
            self.fake._leave()

    def post(self, raw: bytes) -> None:
        """Answer a POST whose body is ``raw``."""
        raise NotImplementedError

    def _send(self, status: int, payload: dict[str, Any] | bytes, headers: dict[str, str] | None = None) -> None:
        """Answer with ``payload`` (a dict is sent as JSON, bytes as they are) as ``application/json``."""
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up first
            self.close_connection = True

    def _drop(self) -> None:
        """Close the connection without answering."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _unanswered(self, fault: Fault) -> bool:
        """Carry out a fault that leaves the request without an answer: ``hang`` (no answer for the
        fault's seconds, or until the server stops) or ``drop`` (the connection closed); whether it was one."""
        if fault.kind == "hang":
            self.fake._stop.wait(fault.seconds)
            self.close_connection = True
            return True
        if fault.kind == "drop":
            self._drop()
            return True
        return False


class SilentServer:
    """A TCP server on 127.0.0.1 that accepts connections and never answers (see the module doc).

    ``path`` is what :attr:`url` ends in (``/v1`` for an OpenAI-style base URL);
    :attr:`connections` counts the connections accepted, :attr:`received` the bytes read.
    """

    def __init__(self, path: str = "/") -> None:
        self.path = path
        self.connections = 0
        self.received = 0
        self._listener: socket.socket | None = None
        self._url: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The URL to give the client (it stays the same once the server stopped: nothing listens there then)."""
        assert self._url is not None, "start the server first"
        return self._url

    def start(self) -> SilentServer:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(256)
        listener.setblocking(False)
        self._listener = listener
        host, port = listener.getsockname()[:2]
        self._url = f"http://{host}:{port}{self.path}"
        self._thread = threading.Thread(target=self._serve, name="silent-server", daemon=True)
        self._thread.start()
        return self

    def _serve(self) -> None:
        assert self._listener is not None
        selector = selectors.DefaultSelector()
        selector.register(self._listener, selectors.EVENT_READ)
        held: list[socket.socket] = []
        try:
            while not self._stop.is_set():
                for key, _ in selector.select(timeout=0.05):
                    if key.fileobj is self._listener:
                        with contextlib.suppress(BlockingIOError):
                            conn, _ = self._listener.accept()
                            conn.setblocking(False)
                            held.append(conn)
                            self.connections += 1
                            selector.register(conn, selectors.EVENT_READ)
                        continue
                    conn = key.fileobj
                    assert isinstance(conn, socket.socket)
                    try:
                        data = conn.recv(65536)
                    except BlockingIOError:
                        continue
                    except OSError:
                        data = b""
                    if not data:  # the client gave up: forget it
                        selector.unregister(conn)
                        conn.close()
                        continue
                    self.received += len(data)
        finally:
            selector.close()
            for conn in held:
                with contextlib.suppress(OSError):
                    conn.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._listener is not None:
            self._listener.close()

    def __enter__(self) -> SilentServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
