"""A TCP proxy on 127.0.0.1 that adds a fixed latency to every HTTP request and counts them.

Each burst of bytes from a client (an HTTP request) waits ``latency_s`` before it is
forwarded, as a far object store would answer later. Requests are counted by their
request lines and response bodies by their ``Content-Length`` headers, so the benchmark
can report requests per batch and body bytes fetched per record (HTTP headers excluded).
"""

from __future__ import annotations

import re
import socket
import threading
import time

__all__ = ["LatencyProxy"]

_REQUEST = re.compile(rb"^(GET|HEAD|PUT|POST|DELETE) ", re.M)
_LENGTH = re.compile(rb"\r\nContent-Length: (\d+)\r\n", re.I)


class LatencyProxy:
    """Forwards 127.0.0.1:<port> to ``target_port``, delaying each request by ``latency_s``."""

    def __init__(self, target_port: int, latency_s: float) -> None:
        self.target_port, self.latency_s = target_port, latency_s
        self.requests = 0
        self.body_bytes = 0
        self._lock = threading.Lock()
        self._server = socket.socket()
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(512)
        self.port = int(self._server.getsockname()[1])
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def reset(self) -> None:
        with self._lock:
            self.requests = self.body_bytes = 0

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, requests: bool) -> None:
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                if requests:
                    n = len(_REQUEST.findall(data))
                    if n:
                        time.sleep(self.latency_s)
                        with self._lock:
                            self.requests += n
                else:
                    sizes = [int(m) for m in _LENGTH.findall(data)]
                    if sizes:
                        with self._lock:
                            self.body_bytes += sum(sizes)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def close(self) -> None:
        self._closed = True
        self._server.close()
