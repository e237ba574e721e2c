"""The lean range client: ranged GETs over kept-alive connections, signed here.

Reading a record of a dataset larger than the chunk cache costs one range request, so
the client's own CPU per request bounds the loader. s3fs spends about 2 ms of CPU per
request in aiobotocore (its request model, event hooks, an asyncio loop in a thread);
this client sends ``GET`` with ``Range: bytes=a-b`` on a connection kept from a small
pool per host (``http.client``), signs it with :mod:`~thresher.sources.remote.sigv4`
when the bucket is not anonymous, and reads the body: a tenth of that CPU or less.

It serves ``s3://`` (AWS or any S3-compatible endpoint) and ``http(s)://``; options it
does not know keep those URLs on fsspec (:mod:`~thresher.sources.remote.lean_config`),
as do all other schemes. Listings, globs and object metadata stay on fsspec.

Failures become exceptions ``fs.describe_error`` turns into SourceErrors: a missing
object is ``FileNotFoundError``, refused credentials ``PermissionError``, a failing or
unreachable server an ``OSError`` naming the URL, the byte range and what to do. Answers
5xx, 429 and dropped connections are retried with backoff (4 attempts, within the
timeout); a request that gets no answer within ``timeout`` seconds fails, never hangs.
A range past the object's end returns the bytes there are (the caller checks lengths).

Example:
    >>> client = client_for("s3://bucket/x.array_record", {"requester_pays": True}, timeout=5.0)
    >>> client is None  # an option only s3fs knows: fsspec reads this URL
    True
"""

from __future__ import annotations

import http.client
import random
import re
import ssl
import threading
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any

from thresher.errors import ConfigError
from thresher.sources.remote.lean_config import Target, resolve
from thresher.sources.remote.sigv4 import Signer

__all__ = ["LeanClient", "client_for"]

_ATTEMPTS = 4
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
_CODE = re.compile(rb"<Code>([^<]{1,100})</Code>")
_MESSAGE = re.compile(rb"<Message>([^<]{1,300})</Message>")
_SERVER_DONE = (ConnectionError, http.client.IncompleteRead, http.client.BadStatusLine, ssl.SSLError)


def client_for(url: str, storage_options: Mapping[str, Any] | None, timeout: float,
               max_idle: int = 16) -> LeanClient | None:
    """A client for the scheme of ``url`` with these options, or None where fsspec must read."""
    target = resolve(url, storage_options)
    return None if target is None else LeanClient(target, timeout, max_idle)


class LeanClient:
    """Ranged GETs for one scheme and one set of options; used from many threads at once.

    ``cat_file(url, start, end)`` returns bytes ``[start, end)`` (fewer past the end),
    as fsspec filesystems do, so the reader uses either the same way.
    """

    def __init__(self, target: Target, timeout: float, max_idle: int = 16) -> None:
        self.target = target
        self.timeout = timeout
        self.max_idle = max_idle
        self._idle: dict[tuple[str, str], list[http.client.HTTPConnection]] = {}
        self._lock = threading.Lock()
        self._signer = Signer()
        self._regions: dict[str, str] = {}  # buckets that live in another region than asked
        self._addresses: dict[str, tuple[str, str, str, str, str]] = {}
        try:
            self._ssl = ssl.create_default_context(cafile=target.ca_bundle if target.verify else None)
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(f"cannot load the certificates {target.ca_bundle!r} (client_kwargs verify= or "
                              f"AWS_CA_BUNDLE): {e}") from None
        if not target.verify:
            self._ssl.check_hostname = False
            self._ssl.verify_mode = ssl.CERT_NONE

    # --- connections -------------------------------------------------------------------

    def _connection(self, scheme: str, netloc: str) -> tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            idle = self._idle.get((scheme, netloc))
            if idle:
                return idle.pop(), True
        if scheme == "https":
            return http.client.HTTPSConnection(netloc, timeout=self.timeout, context=self._ssl), False
        return http.client.HTTPConnection(netloc, timeout=self.timeout), False

    def _release(self, scheme: str, netloc: str, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            idle = self._idle.setdefault((scheme, netloc), [])
            if len(idle) < self.max_idle:
                idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        """Closes the kept connections."""
        with self._lock:
            conns = [c for idle in self._idle.values() for c in idle]
            self._idle.clear()
        for c in conns:
            c.close()

    # --- requests ----------------------------------------------------------------------

    def _address(self, url: str) -> tuple[str, str, str, str, str]:
        """(scheme, netloc, path as sent, bucket, region) of ``url`` (kept per URL)."""
        found = self._addresses.get(url)
        if found is None or (found[3] and found[4] != self._regions.get(found[3], found[4])):
            found = self._addresses[url] = self._locate(url)
        return found

    def _locate(self, url: str) -> tuple[str, str, str, str, str]:
        if self.target.scheme in ("http", "https"):
            parts = urllib.parse.urlsplit(url)
            path = parts.path + (f"?{parts.query}" if parts.query else "")
            return parts.scheme, parts.netloc, path or "/", "", ""
        bucket, _, key = url.partition("://")[2].partition("/")
        region = self._regions.get(bucket, self.target.region)
        parts = urllib.parse.urlsplit(self.target.url_for(bucket, key, region))
        return parts.scheme, parts.netloc, parts.path, bucket, region

    def _headers(self, netloc: str, path: str, region: str, start: int, end: int) -> dict[str, str]:
        headers = dict(self.target.headers)
        headers["Range"] = f"bytes={start}-{end - 1}"
        if self.target.scheme in ("s3", "s3a") and not self.target.anon:
            headers.update(self._signer.headers(self.target.credentials(), region, netloc, path))
        return headers

    def cat_file(self, url: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the object at ``url`` (fewer if it is shorter)."""
        if end <= start:
            return b""
        deadline = time.monotonic() + self.timeout
        what = f"GET bytes={start}-{end - 1} of {url}"
        problem = ""
        for attempt in range(_ATTEMPTS):
            scheme, netloc, path, bucket, region = self._address(url)
            conn, reused = self._connection(scheme, netloc)
            try:
                conn.request("GET", path, headers=self._headers(netloc, path, region, start, end))
                response = conn.getresponse()
                status, body = response.status, response.read()
            except TimeoutError:
                conn.close()
                raise TimeoutError(f"{what}: no answer within {self.timeout:g} s (RemoteReadOptions.timeout); "
                                   "the storage is unreachable or too slow") from None
            except _SERVER_DONE as e:
                conn.close()
                problem = f"{type(e).__name__}: {e}"
                if reused and attempt == 0:  # a kept connection the server had closed meanwhile
                    continue
            else:
                if response.will_close:
                    conn.close()
                else:
                    self._release(scheme, netloc, conn)
                if status in (200, 206):
                    return body[start:end] if status == 200 else body
                if status == 416:
                    return b""  # starts past the end: the caller reports the truncation
                redirect = response.getheader("x-amz-bucket-region")
                if redirect and redirect != region and status in (301, 307, 400) and bucket:
                    self._regions[bucket] = redirect
                    continue
                problem = _problem(status, body)
                if status == 404:
                    raise FileNotFoundError(f"{what}: {problem}")
                if status in (401, 403):
                    raise PermissionError(f"{what}: the server refused the request ({problem})")
                if status not in _RETRY_STATUS:
                    raise OSError(f"{what}: the server answered {problem}; check the URL and the "
                                  "endpoint (storage_options client_kwargs={'endpoint_url': ...})")
            pause = min(0.05 * 2 ** attempt, 1.0) * (0.5 + random.random())
            if time.monotonic() + pause >= deadline:
                break
            time.sleep(pause)
        raise OSError(f"{what} failed after {attempt + 1} attempts ({problem}); the storage is unreachable "
                      "or failing: check the endpoint and the network, or read through fsspec with "
                      "RemoteReadOptions(client='fsspec')")


def _problem(status: int, body: bytes) -> str:
    code, message = _CODE.search(body), _MESSAGE.search(body)
    text = f"HTTP {status}"
    if code:
        text += f" {code.group(1).decode(errors='replace')}"
    if message:
        text += f": {message.group(1).decode(errors='replace')}"
    return text

