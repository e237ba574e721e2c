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

Every request may wait ``latency_s`` before it is answered, as a far bucket would.
``GET /_stats`` answers ``{"requests": n, "body_bytes": m}`` (object requests only;
``?reset=1`` zeroes them). Run it in a thread (``RangeServer(root)``), in its own process
(``RangeServer(root, process=True)``: its work then does not share the client's GIL), or
from a shell::

    python -m tests.sources.remote.range_server --root /data/buckets --port 9000 --latency-ms 20
"""

from __future__ import annotations

import argparse
import contextlib
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

_S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"
_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,62}$")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


class _Store:
    """The directory, the injected latency and the counters a server shares with its handlers."""

    def __init__(self, root: str, latency_s: float, key: str | None) -> None:
        self.root, self.latency_s, self.key = os.path.abspath(root), latency_s, key
        self.lock = threading.Lock()
        self.requests = self.body_bytes = 0
        self.uploads = os.path.join(self.root, ".uploads")
        os.makedirs(self.uploads, exist_ok=True)

    def path(self, bucket: str, key: str = "") -> str:
        if not _BUCKET.match(bucket) or any(p in ("", ".", "..") for p in key.split("/")[:-1]):
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


def _etag(st: os.stat_result) -> str:
    return f'"{st.st_size:x}-{st.st_mtime_ns:x}"'


def _iso(st: os.stat_result) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(st.st_mtime))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
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
            data = _aws_chunks(data)
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
            headers = dict(headers, **{"ETag": _etag(st), "Accept-Ranges": "bytes",
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
                self.wfile.write(block)
                pos += len(block)
            with self.server.store.lock:
                self.server.store.body_bytes += pos - start
        finally:
            os.close(fd)

    # --- S3 -----------------------------------------------------------------------

    def _s3(self) -> None:
        store: _Store = self.server.store
        query, bucket, key = self._route()
        if not bucket:
            names = sorted(b for b in os.listdir(store.root) if _BUCKET.match(b))
            self._xml(200, f'<ListAllMyBucketsResult xmlns="{_S3_NS}"><Buckets>' + "".join(
                f"<Bucket><Name>{b}</Name></Bucket>" for b in names) + "</Buckets></ListAllMyBucketsResult>")
            return
        folder = store.path(bucket)
        if self.command == "PUT" and not key:
            os.makedirs(folder, exist_ok=True)
            self._send(200, headers={"Location": f"/{bucket}"})
            return
        if not os.path.isdir(folder):
            self._error(404, "NoSuchBucket", f"The specified bucket {bucket} does not exist")
            return
        if not key:
            if self.command == "GET":
                self._list_s3(bucket, query)
            elif self.command == "POST" and "delete" in query:
                self._delete_many(bucket)
            elif self.command == "DELETE":
                os.rmdir(folder)
                self._send(204)
            else:
                self._send(200)  # HEAD bucket
            return
        if self.command in ("GET", "HEAD"):
            self._object(store.path(bucket, key), {})
        elif self.command == "PUT":
            self._put_s3(bucket, key)
        elif self.command == "DELETE":
            with contextlib.suppress(FileNotFoundError):
                os.remove(store.path(bucket, key))
            self._send(204)
        else:
            self._error(501, "NotImplemented", f"{self.command} {self.path} (multipart uploads are not served)")

    def _put_s3(self, bucket: str, key: str) -> None:
        store: _Store = self.server.store
        source = self.headers.get("x-amz-copy-source")
        if source is None:
            st = store.write(bucket, key, self._body())
            self._send(200, headers={"ETag": _etag(st)})
            return
        self._body()
        src_bucket, _, src_key = urllib.parse.unquote(source.split("?")[0]).lstrip("/").partition("/")
        try:
            with open(store.path(src_bucket, src_key), "rb") as f:
                data = f.read()
        except FileNotFoundError:
            self._error(404, "NoSuchKey", f"The copy source {source} does not exist.")
            return
        st = store.write(bucket, key, data)
        self._xml(200, f"<CopyObjectResult><ETag>{escape(_etag(st))}</ETag>"
                       f"<LastModified>{_iso(st)}</LastModified></CopyObjectResult>")

    def _delete_many(self, bucket: str) -> None:
        store: _Store = self.server.store
        keys = [_unescape(k)
                for k in re.findall(r"<Key>(.*?)</Key>", self._body().decode(), re.S)]
        for k in keys:
            with contextlib.suppress(FileNotFoundError):
                os.remove(store.path(bucket, k))
        self._xml(200, f'<DeleteResult xmlns="{_S3_NS}">' + "".join(
            f"<Deleted><Key>{escape(k)}</Key></Deleted>" for k in keys) + "</DeleteResult>")

    def _list_s3(self, bucket: str, query: dict[str, list[str]]) -> None:
        def q(name: str, default: str = "") -> str:
            return query.get(name, [default])[0]

        prefix, delimiter = q("prefix"), q("delimiter")
        after = q("continuation-token") or q("start-after") or q("marker")
        files, prefixes, truncated, last = _listing(self.server.store, bucket, prefix, delimiter,
                                                    after, int(q("max-keys", "1000")))
        contents = "".join(
            f"<Contents><Key>{escape(k)}</Key><LastModified>{_iso(st)}</LastModified>"
            f"<ETag>{escape(_etag(st))}</ETag><Size>{st.st_size}</Size>"
            "<StorageClass>STANDARD</StorageClass></Contents>" for k, st in files)
        common = "".join(f"<CommonPrefixes><Prefix>{escape(p)}</Prefix></CommonPrefixes>" for p in prefixes)
        more = f"<NextContinuationToken>{escape(last)}</NextContinuationToken>" \
               f"<NextMarker>{escape(last)}</NextMarker>" if truncated else ""
        self._xml(200, f'<ListBucketResult xmlns="{_S3_NS}"><Name>{bucket}</Name>'
                       f"<Prefix>{escape(prefix)}</Prefix><Delimiter>{escape(delimiter)}</Delimiter>"
                       f"<KeyCount>{len(files) + len(prefixes)}</KeyCount><MaxKeys>1000</MaxKeys>"
                       f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>{more}"
                       f"{contents}{common}</ListBucketResult>")

    # --- GCS JSON API -------------------------------------------------------------

    def _gcs(self) -> None:
        store: _Store = self.server.store
        url = urllib.parse.urlsplit(self.path)
        query = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
        m = re.match(r"/(download/)?storage/v1/b/([^/]+)(/o(?:/(.*))?)?$", url.path)
        if m is None or self.command not in ("GET", "HEAD"):
            self._error(501, "NotImplemented", f"{self.command} {url.path} is not served (reads only)")
            return
        download, bucket, objects, key = m.group(1), urllib.parse.unquote(m.group(2)), m.group(3), m.group(4)
        if not os.path.isdir(store.path(bucket)):
            self._error(404, "NoSuchBucket", f"bucket {bucket} does not exist")
            return
        if key is not None:
            key = urllib.parse.unquote(key)
            if download or query.get("alt") == "media":
                self._object(store.path(bucket, key), {})
                return
            try:
                st = os.stat(store.path(bucket, key))
            except (FileNotFoundError, NotADirectoryError):
                self._error(404, "NoSuchKey", f"No such object: {bucket}/{key}")
                return
            self._json(_gcs_object(bucket, key, st))
        elif objects:
            files, prefixes, truncated, last = _listing(
                store, bucket, query.get("prefix", ""), query.get("delimiter", ""),
                query.get("pageToken", ""), int(query.get("maxResults", "1000")))
            out: dict[str, Any] = {"kind": "storage#objects",
                                   "items": [_gcs_object(bucket, k, st) for k, st in files],
                                   "prefixes": prefixes}
            if truncated:
                out["nextPageToken"] = last
            self._json(out)
        else:
            self._json({"kind": "storage#bucket", "name": bucket, "id": bucket})

    def _json(self, data: dict[str, Any]) -> None:
        self._send(200, json.dumps(data).encode(), {"Content-Type": "application/json"})


def _unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&apos;", "'") \
        .replace("&amp;", "&")


def _gcs_object(bucket: str, key: str, st: os.stat_result) -> dict[str, Any]:
    return {"kind": "storage#object", "bucket": bucket, "name": key, "size": str(st.st_size),
            "generation": str(st.st_mtime_ns), "etag": _etag(st).strip('"'), "updated": _iso(st),
            "timeCreated": _iso(st), "contentType": "application/octet-stream", "storageClass": "STANDARD"}


def _listing(store: _Store, bucket: str, prefix: str, delimiter: str, after: str,
             limit: int) -> tuple[list[tuple[str, os.stat_result]], list[str], bool, str]:
    """Objects and common prefixes under ``prefix`` after key ``after``, at most ``limit``."""
    files: list[tuple[str, os.stat_result]] = []
    prefixes: list[str] = []
    last = ""
    for k in store.keys(bucket):
        if not k.startswith(prefix) or k <= after:
            continue
        rest = k[len(prefix):]
        if delimiter and delimiter in rest:
            common = prefix + rest.split(delimiter, 1)[0] + delimiter
            if common in prefixes or common <= after:
                continue
            if len(files) + len(prefixes) >= limit:
                return files, prefixes, True, last
            prefixes.append(common)
            last = common + "\uffff"  # past every key under it
            continue
        if len(files) + len(prefixes) >= limit:
            return files, prefixes, True, last
        files.append((k, os.stat(store.path(bucket, k))))
        last = k
    return files, prefixes, False, last


def _aws_chunks(data: bytes) -> bytes:
    """The payload of an ``aws-chunked`` body (``hex-size[;ext]\\r\\n data \\r\\n``..., trailers)."""
    out, pos = [], 0
    while pos < len(data):
        eol = data.index(b"\r\n", pos)
        size = int(data[pos:eol].split(b";")[0], 16)
        if size == 0:
            break
        out.append(data[eol + 2:eol + 2 + size])
        pos = eol + 2 + size + 2
    return b"".join(out)


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
