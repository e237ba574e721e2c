"""AWS Signature Version 4 for S3 GET requests, written for the lean range client.

Only what a ranged GET needs: the payload is not hashed (``UNSIGNED-PAYLOAD``, which S3
accepts for GETs over HTTPS and HTTP), and the signed headers are ``host``,
``x-amz-content-sha256``, ``x-amz-date`` and, with temporary credentials,
``x-amz-security-token``. The signing key (four HMACs) changes only with the day, the
region and the secret, so it is derived once per (secret, day, region) and kept.

Example:
    >>> import datetime
    >>> signer = Signer()
    >>> when = datetime.datetime(2013, 5, 24, tzinfo=datetime.timezone.utc)
    >>> h = signer.headers(Credentials("AKIDEXAMPLE", "secret"), "us-east-1",
    ...                    "examplebucket.s3.amazonaws.com", "/test.txt", when)
    >>> h["x-amz-date"], h["Authorization"].split(", ")[1]
    ('20130524T000000Z', 'SignedHeaders=host;x-amz-content-sha256;x-amz-date')
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import hmac
import threading

__all__ = ["Credentials", "Signer"]

_UNSIGNED = "UNSIGNED-PAYLOAD"


@dataclasses.dataclass(frozen=True)
class Credentials:
    """An access key, its secret and (for temporary credentials) a session token."""

    access_key: str
    secret_key: str
    token: str | None = None

    def __repr__(self) -> str:  # never print the secret
        return f"Credentials(access_key={self.access_key!r}, secret_key='***')"


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


class Signer:
    """Signs S3 GET requests; keeps one derived signing key per (secret, day, region)."""

    def __init__(self, service: str = "s3") -> None:
        self.service = service
        self._keys: dict[tuple[str, str, str], bytes] = {}
        self._lock = threading.Lock()

    def _key(self, secret: str, day: str, region: str) -> bytes:
        k = (secret, day, region)
        key = self._keys.get(k)
        if key is None:
            key = _hmac(_hmac(_hmac(_hmac(("AWS4" + secret).encode(), day), region), self.service),
                        "aws4_request")
            with self._lock:
                if len(self._keys) > 16:  # old days and rotated secrets
                    self._keys.clear()
                self._keys[k] = key
        return key

    def headers(self, creds: Credentials, region: str, host: str, path: str,
                now: datetime.datetime | None = None, query: str = "") -> dict[str, str]:
        """The headers that sign ``GET`` of ``path`` (already URI-encoded, as sent) on
        ``host`` (with ``:port`` unless it is the scheme's default) with ``query`` (already
        canonical: sorted, encoded)."""
        now = now or datetime.datetime.now(datetime.timezone.utc)
        stamp = now.strftime("%Y%m%dT%H%M%SZ")
        day = stamp[:8]
        signed = {"host": host, "x-amz-content-sha256": _UNSIGNED, "x-amz-date": stamp}
        if creds.token:
            signed["x-amz-security-token"] = creds.token
        names = ";".join(signed)  # already sorted
        canonical = "\n".join(["GET", path, query, *(f"{k}:{v}" for k, v in signed.items()), "",
                               names, _UNSIGNED])
        scope = f"{day}/{region}/{self.service}/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope,
                             hashlib.sha256(canonical.encode()).hexdigest()])
        signature = hmac.new(self._key(creds.secret_key, day, region), to_sign.encode(),
                             hashlib.sha256).hexdigest()
        out = {k: v for k, v in signed.items() if k != "host"}
        out["Host"] = host
        out["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={creds.access_key}/{scope}, "
                                f"SignedHeaders={names}, Signature={signature}")
        return out
