"""The S3 and GCS JSON APIs of the range server (tests/sources/remote/range_server.py).

``S3Api`` and ``GcsApi`` are mixins of the server's request handler: they route a
request of their API to the folder store (``self.server.store``) and answer with the
handler's ``_object`` (GET/HEAD of a file, honouring ``Range``), ``_send``, ``_xml``,
``_error`` and ``_body``. Listings are shared: objects and common prefixes under a
prefix, after a key, a page at a time.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
import urllib.parse
from typing import Any
from xml.sax.saxutils import escape

__all__ = ["BUCKET", "GcsApi", "S3Api", "aws_chunks", "etag", "iso"]

_S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"
BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,62}$")


def etag(st: os.stat_result) -> str:
    """An object's ETag: its size and modification time (a rewrite changes it)."""
    return f'"{st.st_size:x}-{st.st_mtime_ns:x}"'


def iso(st: os.stat_result) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(st.st_mtime))


class S3Api:
    """Path-style S3 requests: objects, buckets, listings, copies and deletes."""

    server: Any
    headers: Any
    command: str

    def _s3(self) -> None:
        store = self.server.store
        query, bucket, key = self._route()
        if not bucket:
            names = sorted(b for b in os.listdir(store.root) if BUCKET.match(b))
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
        store = self.server.store
        source = self.headers.get("x-amz-copy-source")
        if source is None:
            st = store.write(bucket, key, self._body())
            self._send(200, headers={"ETag": etag(st)})
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
        self._xml(200, f"<CopyObjectResult><ETag>{escape(etag(st))}</ETag>"
                       f"<LastModified>{iso(st)}</LastModified></CopyObjectResult>")

    def _delete_many(self, bucket: str) -> None:
        store = self.server.store
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
            f"<Contents><Key>{escape(k)}</Key><LastModified>{iso(st)}</LastModified>"
            f"<ETag>{escape(etag(st))}</ETag><Size>{st.st_size}</Size>"
            "<StorageClass>STANDARD</StorageClass></Contents>" for k, st in files)
        common = "".join(f"<CommonPrefixes><Prefix>{escape(p)}</Prefix></CommonPrefixes>" for p in prefixes)
        more = f"<NextContinuationToken>{escape(last)}</NextContinuationToken>" \
               f"<NextMarker>{escape(last)}</NextMarker>" if truncated else ""
        self._xml(200, f'<ListBucketResult xmlns="{_S3_NS}"><Name>{bucket}</Name>'
                       f"<Prefix>{escape(prefix)}</Prefix><Delimiter>{escape(delimiter)}</Delimiter>"
                       f"<KeyCount>{len(files) + len(prefixes)}</KeyCount><MaxKeys>1000</MaxKeys>"
                       f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>{more}"
                       f"{contents}{common}</ListBucketResult>")


class GcsApi:
    """GCS JSON API reads: object metadata, listings, bucket metadata, media downloads."""

    server: Any
    command: str
    path: str

    def _gcs(self) -> None:
        store = self.server.store
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
            "generation": str(st.st_mtime_ns), "etag": etag(st).strip('"'), "updated": iso(st),
            "timeCreated": iso(st), "contentType": "application/octet-stream", "storageClass": "STANDARD"}


def _listing(store: Any, bucket: str, prefix: str, delimiter: str, after: str,
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


def aws_chunks(data: bytes) -> bytes:
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
