"""A small object store on 127.0.0.1 that serves a local directory: S3, GCS JSON and plain HTTP.

Unlike moto (which copies the whole object for every range request), a range request
reads only its bytes from disk (``os.pread``), so clients can be measured against it.
Each top-level folder of ``root`` is a bucket and each file under it an object.

- **S3** (path style, what s3fs/botocore send with ``endpoint_url``): GET of an object
  with ``Range: bytes=a-b`` (206, ``Content-Range``) or whole, HEAD of objects and
  buckets, ListObjectsV2/V1 (prefix, delimiter, pagination), PUT of objects (plain,
  ``chunked`` or ``aws-chunked`` bodies) and buckets, CopyObject, DELETE, DeleteObjects.
  Credentials are not checked unless ``key`` is given: then a request signed with
  another access key is refused (403 ``InvalidAccessKeyId``).
- **GCS JSON API** (what gcsfs sends with ``endpoint_url``): object metadata
  ``/storage/v1/b/B/o/K``, listing ``/storage/v1/b/B/o?prefix=&delimiter=``, bucket
  metadata, media download ``/download/storage/v1/b/B/o/K?alt=media`` with ``Range``.
- **HTTP(S)** (fsspec's HTTPFileSystem): ``GET /bucket/key`` with ``Range`` and HEAD.

The two bucket APIs are in ``object_apis``; this module holds the folder store, the
range reads and the server.

Every request may wait ``latency_s`` before it is answered, as a far bucket would.
``GET /_stats`` answers ``{"requests": n, "body_bytes": m}`` (object requests only;
``?reset=1`` zeroes them). ``GET /_flip?object=BUCKET/KEY&offset=N`` damages the next
response that holds byte ``N`` of that object (the byte is sent with its lowest bit
flipped, once), as a torn or altered response would (``flip_once``). Run it in a thread
(``RangeServer(root)``), in its own process (``RangeServer(root, process=True)``: its work
then does not share the client's GIL), or from a shell::

    python -m tests.sources.remote.range_server --root /data/buckets --port 9000 --latency-ms 20
"""

from __future__ import annotations

import argparse
import email.utils
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from xml.sax.saxutils import escape

from tests.sources.remote.object_apis import BUCKET, GcsApi, S3Api, aws_chunks, etag

_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


class _Store:
    """The directory, the injected latency and the counters a server shares with its handlers."""

    def __init__(self, root: str, latency_s: float, key: str | None) -> None:
        self.root, self.latency_s, self.key = os.path.abspath(root), latency_s, key
        self.lock = threading.Lock()
        self.requests = self.body_bytes = 0
        self.flips: dict[str, list[int]] = {}  # file -> offsets to send damaged, once each
        self.uploads = os.path.join(self.root, ".uploads")
        os.makedirs(self.uploads, exist_ok=True)

    def path(self, bucket: str, key: str = "") -> str:
        if not BUCKET.match(bucket) or any(p in ("", ".", "..") for p in key.split("/")[:-1]):
            raise ValueError(f"bad bucket or key {bucket!r}/{key!r}")
        return os.path.join(self.root, bucket, *key.split("/")) if key else os.path.join(self.root, bucket)

    def keys(self, bucket: str) -> list[str]:
        base = self.path(bucket)
        out = []
        for folder, _, files in os.walk(base):
            rel = os.path.relpath(folder, base)
            out += [f if rel == "." else f"{rel.replace(os.sep, '/')}/{f}" for f in files]
        return sorted(out)

    def write(self, bucket: str, key: str, data: bytes) -> os.stat_result:
        target = self.path(bucket, key)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        tmp = os.path.join(self.uploads, f"{threading.get_ident()}-{time.monotonic_ns()}")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, target)  # readers see the old object or the new one, never half
        return os.stat(target)


class _Handler(S3Api, GcsApi, BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body are two writes: with Nagle's algorithm the body would wait for the
    # client's delayed ACK of the headers (40 ms on Linux), as no object store makes it wait.
    disable_nagle_algorithm = True
    server: Any

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # --- plumbing ----------------------------------------------------------------

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None,
              length: int | None = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)

    def _xml(self, status: int, body: str) -> None:
        self._send(status, ('<?xml version="1.0" encoding="UTF-8"?>\n' + body).encode(),
                   {"Content-Type": "application/xml"})

    def _error(self, status: int, code: str, message: str) -> None:
        if self.path.startswith(("/storage/", "/download/")):
            body = json.dumps({"error": {"code": status, "message": f"{code}: {message}"}})
            self._send(status, body.encode(), {"Content-Type": "application/json"})
        else:
            self._xml(status, f"<Error><Code>{code}</Code><Message>{escape(message)}</Message></Error>")

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = self._chunked()
        else:
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        streaming = self.headers.get("x-amz-content-sha256", "").startswith("STREAMING-")
        if streaming or "aws-chunked" in self.headers.get("Content-Encoding", ""):
            data = aws_chunks(data)
        return data

    def _chunked(self) -> bytes:
        parts = []
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(parts)
            parts.append(self.rfile.read(size))
            self.rfile.readline()

    def _route(self) -> tuple[dict[str, list[str]], str, str]:
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        bucket, _, key = urllib.parse.unquote(url.path).lstrip("/").partition("/")
        return query, bucket, key

    def _handle(self) -> None:
        store: _Store = self.server.store
        if self.path.startswith("/_stats"):
            with store.lock:
                body = json.dumps({"requests": store.requests, "body_bytes": store.body_bytes})
                if "reset=1" in self.path:
                    store.requests = store.body_bytes = 0
            self._send(200, body.encode(), {"Content-Type": "application/json"})
            return
        if self.path.startswith("/_flip?"):
            query, _, _ = self._route()
            bucket, _, key = query["object"][0].partition("/")
            with store.lock:
                store.flips.setdefault(store.path(bucket, key), []).append(int(query["offset"][0]))
            self._send(200, b"{}", {"Content-Type": "application/json"})
            return
        if store.latency_s:
            time.sleep(store.latency_s)
        with store.lock:
            store.requests += 1
        if store.key is not None and "Credential=" in self.headers.get("Authorization", "") \
                and f"Credential={store.key}/" not in self.headers["Authorization"]:
            self._error(403, "InvalidAccessKeyId", "the access key is not known to this server")
            return
        try:
            if self.path.startswith(("/storage/v1/", "/download/storage/v1/")):
                self._gcs()
            else:
                self._s3()
        except ValueError as e:
            self._error(400, "InvalidArgument", str(e))

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _handle

    # --- objects ------------------------------------------------------------------

    def _object(self, path: str, headers: dict[str, str]) -> None:
        """GET/HEAD of a file: whole, or the bytes of a ``Range`` header (read only those)."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            self._error(404, "NoSuchKey", "The specified key does not exist.")
            return
        try:
            st = os.fstat(fd)
            size = st.st_size
            headers = dict(headers, **{"ETag": etag(st), "Accept-Ranges": "bytes",
                                       "Last-Modified": email.utils.formatdate(st.st_mtime, usegmt=True),
                                       "Content-Type": "application/octet-stream"})
            m = _RANGE.match(self.headers.get("Range", "").replace(" ", ""))
            start, end, status = 0, size, 200
            if m and (m.group(1) or m.group(2)):
                if m.group(1):
                    start = int(m.group(1))
                    end = min(size, int(m.group(2)) + 1) if m.group(2) else size
                else:
                    start = max(0, size - int(m.group(2)))
                if start >= size or start >= end:
                    headers["Content-Range"] = f"bytes */{size}"
                    self._error(416, "InvalidRange", "The requested range is not satisfiable")
                    return
                status = 206
                headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
            if self.command == "HEAD":
                self._send(status, headers=headers, length=end - start)
                return
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(end - start))
            self.end_headers()
            pos = start
            while pos < end:
                block = os.pread(fd, min(end - pos, 4 << 20), pos)
                if not block:
                    break
                if self.server.store.flips:
                    block = self._damaged(path, pos, block)
                self.wfile.write(block)
                pos += len(block)
            with self.server.store.lock:
                self.server.store.body_bytes += pos - start
        finally:
            os.close(fd)


    def _damaged(self, path: str, pos: int, block: bytes) -> bytes:
        """``block`` (bytes from ``pos`` of ``path``) with the flips asked for applied, once."""
        store = self.server.store
        with store.lock:
            offsets = store.flips.get(path, [])
            hits = [o for o in offsets if pos <= o < pos + len(block)]
            for o in hits:
                offsets.remove(o)
        if not hits:
            return block
        damaged = bytearray(block)
        for o in hits:
            damaged[o - pos] ^= 1
        return bytes(damaged)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    store: _Store

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):  # clients that hang up
            super().handle_error(request, client_address)


class RangeServer:
    """The server on a free port of 127.0.0.1, in a thread or (``process=True``) a subprocess.

    ``endpoint`` is its URL; ``root`` the directory it serves (a temporary one if None);
    ``latency_s`` the wait before each request is answered; ``key`` the only access key
    accepted (None: any). Stop it with ``stop()`` or a ``with`` block.
    """

    def __init__(self, root: str, latency_s: float = 0.0, *, key: str | None = None,
                 process: bool = False, port: int = 0) -> None:
        self.root = os.path.abspath(root)
        self._thread: threading.Thread | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._server: _Server | None = None
        if process:
            port = port or free_port()
            cmd = [sys.executable, "-m", "tests.sources.remote.range_server", "--root", self.root,
                   "--port", str(port), "--latency-ms", str(latency_s * 1000)] + (["--key", key] if key else [])
            self._process = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL)
            self.port = port
        else:
            self._server = serve(self.root, latency_s, key=key, port=port)
            self.port = int(self._server.server_address[1])
            self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
            self._thread.start()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 30
        while True:
            try:
                self.stats()
                return
            except OSError:
                if (self._process is not None and self._process.poll() is not None) or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"the range server on port {self.port} did not start") from None
                time.sleep(0.05)

    def stats(self, reset: bool = False) -> dict[str, int]:
        """``{"requests": ..., "body_bytes": ...}`` since the last reset."""
        with urllib.request.urlopen(f"{self.endpoint}/_stats{'?reset=1' if reset else ''}", timeout=5) as r:
            return dict(json.loads(r.read()))

    def flip_once(self, bucket: str, key: str, offset: int) -> None:
        """The next response holding byte ``offset`` of ``bucket/key`` sends it damaged."""
        query = urllib.parse.urlencode({"object": f"{bucket}/{key}", "offset": offset})
        with urllib.request.urlopen(f"{self.endpoint}/_flip?{query}", timeout=5) as r:
            r.read()

    def make_bucket(self, name: str) -> str:
        """Creates the bucket ``name`` (a folder of ``root``) and returns its name."""
        os.makedirs(os.path.join(self.root, name), exist_ok=True)
        return name

    def s3_options(self, key: str = "testing", secret: str = "testing") -> dict[str, Any]:
        """``storage_options`` for s3fs that point at this server."""
        return {"key": key, "secret": secret,
                "client_kwargs": {"endpoint_url": self.endpoint, "region_name": "us-east-1"}}

    def gcs_options(self) -> dict[str, Any]:
        """``storage_options`` for gcsfs that point at this server (anonymous)."""
        return {"token": "anon", "endpoint_url": self.endpoint}

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._process is not None:
            stop_process(self._process)

    def __enter__(self) -> RangeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def free_port() -> int:
    """A TCP port of 127.0.0.1 that is free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """Terminates a server process (killed if it does not end within 10 s)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def serve(root: str, latency_s: float = 0.0, *, key: str | None = None, port: int = 0) -> _Server:
    """A bound server for ``root`` (call ``serve_forever()`` on it)."""
    server = _Server(("127.0.0.1", port), _Handler)
    server.store = _Store(root, latency_s, key)
    return server


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", required=True, help="the directory to serve (one folder per bucket)")
    ap.add_argument("--port", type=int, default=9000)
    ap.add_argument("--latency-ms", type=float, default=0.0, help="wait before each answer")
    ap.add_argument("--key", default=None, help="the only access key accepted (default: any)")
    args = ap.parse_args(argv)
    os.makedirs(args.root, exist_ok=True)
    server = serve(args.root, args.latency_ms / 1000, key=args.key, port=args.port)
    print(f"serving {os.path.abspath(args.root)} on http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
