"""Where the lean range client sends a URL's requests, and with which credentials.

:func:`resolve` reads ``storage_options`` the way s3fs users write them (``key``,
``secret``, ``token``, ``anon``, ``profile``, ``endpoint_url``, ``client_kwargs=
{"endpoint_url", "region_name", "aws_access_key_id", ...}``, ``config_kwargs=
{"signature_version": "UNSIGNED", "s3": {"addressing_style": ...}}``), fsspec's own
defaults for ``s3`` (``FSSPEC_S3_*``), and the environment (``AWS_ENDPOINT_URL_S3``,
``AWS_ENDPOINT_URL``, ``AWS_REGION``/``AWS_DEFAULT_REGION``). Credentials not given are
found by botocore's credential chain (environment, shared files, instance roles), once
per process, then refreshed from it at most once a minute: botocore only *finds* them,
requests never go through it. ``http(s)://`` URLs take no options but ``headers``.

An option it does not know (``requester_pays``, ``sse_customer_key``, ...), or an HTTP
proxy named by the environment (``HTTPS_PROXY``, ...), makes it answer None: those URLs
are read through fsspec, which knows them. ``client_kwargs={"verify": path}`` or
``AWS_CA_BUNDLE`` name the certificates to trust, ``verify=False`` none.

Example:
    >>> t = resolve("s3://bucket/a/b.array_record", {"anon": True,
    ...             "client_kwargs": {"endpoint_url": "http://127.0.0.1:9000"}})
    >>> t.url_for("bucket", "a/b.array_record"), t.anon
    ('http://127.0.0.1:9000/bucket/a/b.array_record', True)
    >>> resolve("s3://b/x", {"requester_pays": True}) is None
    True
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any

from thresher._optional import require
from thresher.errors import ConfigError
from thresher.sources.remote.sigv4 import Credentials

__all__ = ["Target", "resolve"]

# Options that only tune s3fs's own client (caches, block sizes, loops): harmless here.
_S3FS_ONLY = frozenset({"default_block_size", "default_fill_cache", "default_cache_type", "skip_instance_cache",
                        "use_listings_cache", "listings_expiry_time", "max_paths", "asynchronous", "loop",
                        "cache_regions", "version_aware", "fixed_upload_size", "max_concurrency"})
_OPTIONS = _S3FS_ONLY | {"key", "secret", "token", "anon", "profile", "endpoint_url", "client_kwargs",
                         "config_kwargs", "use_ssl"}
_CLIENT_KWARGS = frozenset({"endpoint_url", "region_name", "aws_access_key_id", "aws_secret_access_key",
                            "aws_session_token", "verify", "use_ssl"})
_CONFIG_KWARGS = frozenset({"signature_version", "s3", "retries", "max_pool_connections", "connect_timeout",
                            "read_timeout", "region_name", "tcp_keepalive"})
_DNS_BUCKET = re.compile(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")
_REFRESH_S = 60.0


@dataclasses.dataclass
class Target:
    """How to reach the objects of one scheme: an endpoint (None: AWS), a region, credentials.

    ``headers`` are sent with every request (plain HTTP URLs); ``verify`` checks TLS
    certificates (against ``ca_bundle``, a file, if given); ``anon`` sends requests unsigned.
    """

    scheme: str
    endpoint: str | None = None
    region: str = "us-east-1"
    anon: bool = True
    verify: bool = True
    ca_bundle: str | None = None
    path_style: bool = False
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    static: Credentials | None = None
    profile: str | None = None
    _found: Any = None
    _frozen: Credentials | None = None
    _at: float = -1e9
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def url_for(self, bucket: str, key: str, region: str | None = None) -> str:
        """The HTTP(S) URL of ``key`` in ``bucket`` (in ``region``, if not the target's)."""
        region = region or self.region
        quoted = urllib.parse.quote(key, safe="/")
        if self.endpoint is not None:
            return f"{self.endpoint.rstrip('/')}/{bucket}/{quoted}"
        if not self.path_style and _DNS_BUCKET.match(bucket):
            return f"https://{bucket}.s3.{region}.amazonaws.com/{quoted}"
        return f"https://s3.{region}.amazonaws.com/{bucket}/{quoted}"

    def credentials(self) -> Credentials:
        """The credentials to sign with (from the options, or botocore's chain, refreshed
        from it at most once a minute); PermissionError when there are none."""
        if self.static is not None:
            return self.static
        now = time.monotonic()
        with self._lock:
            if self._frozen is None or now - self._at > _REFRESH_S:
                if self._found is None:
                    self._found = _find_credentials(self.profile)
                frozen = self._found.get_frozen_credentials()
                self._frozen = Credentials(frozen.access_key, frozen.secret_key, frozen.token)
                self._at = now
            return self._frozen


def _find_credentials(profile: str | None) -> Any:
    botocore_session = require("botocore.session", "signing s3:// requests without key= and secret= "
                               "(finding the credentials)")
    found = botocore_session.Session(profile=profile).get_credentials()
    if found is None:
        raise PermissionError("no AWS credentials were found (storage_options key=/secret=, the "
                              "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY variables, a profile or an instance "
                              "role); pass anon=True for a public bucket")
    return found


def _region(options: Mapping[str, Any], client: Mapping[str, Any], profile: str | None) -> str:
    region = client.get("region_name") or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if not region:
        try:
            import botocore.session

            region = botocore.session.Session(profile=profile).get_config_variable("region")
        except Exception:  # no botocore or an unreadable config: AWS's default
            region = None
    return str(region or "us-east-1")


def _proxied() -> bool:
    """True when the environment names an HTTP proxy (this client does not speak to proxies)."""
    return any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY",
                                             "all_proxy"))


def resolve(url: str, storage_options: Mapping[str, Any] | None) -> Target | None:
    """The target for ``url`` (``s3://``, ``s3a://``, ``http://``, ``https://``), or None
    when the lean client cannot honour its options (fsspec then reads it)."""
    scheme = url.partition("://")[0]
    options = dict(storage_options or {})
    if scheme in ("http", "https"):
        if set(options) - {"headers"} or _proxied():
            return None
        return Target(scheme, headers={str(k): str(v) for k, v in dict(options.get("headers") or {}).items()})
    if scheme not in ("s3", "s3a") or _proxied():
        return None
    try:
        from fsspec.config import conf  # FSSPEC_S3_* and fsspec's config files
        options = {**conf.get("s3", {}), **options}
    except ImportError:
        pass
    client = dict(options.get("client_kwargs") or {})
    config = dict(options.get("config_kwargs") or {})
    if set(options) - _OPTIONS or set(client) - _CLIENT_KWARGS or set(config) - _CONFIG_KWARGS \
            or set(dict(config.get("s3") or {})) - {"addressing_style"}:
        return None
    endpoint = (options.get("endpoint_url") or client.get("endpoint_url") or os.environ.get("AWS_ENDPOINT_URL_S3")
                or os.environ.get("AWS_ENDPOINT_URL"))
    if endpoint and not str(endpoint).startswith(("http://", "https://")):
        raise ConfigError(f"reading {url}: the S3 endpoint (storage_options endpoint_url= or client_kwargs="
                          f"{{'endpoint_url': ...}}, or AWS_ENDPOINT_URL) must start with http:// or https://, got "
                          f"{endpoint!r}")
    profile = options.get("profile")
    key = options.get("key") or client.get("aws_access_key_id")
    secret = options.get("secret") or client.get("aws_secret_access_key")
    token = options.get("token") or client.get("aws_session_token")
    anon = bool(options.get("anon")) or str(config.get("signature_version", "")).upper() == "UNSIGNED"
    if bool(key) != bool(secret):
        raise ConfigError(f"reading {url}: storage_options key= and secret= go together (the access key id "
                          "and its secret); pass both, or neither to use the environment's credentials")
    return Target(scheme, endpoint=str(endpoint) if endpoint else None,
                  region=_region(options, client, profile), anon=anon,
                  verify=client.get("verify") is not False,
                  ca_bundle=str(client["verify"]) if isinstance(client.get("verify"), str)
                  else os.environ.get("AWS_CA_BUNDLE") or None,
                  path_style=dict(config.get("s3") or {}).get("addressing_style") == "path",
                  static=Credentials(str(key), str(secret), str(token) if token else None) if key else None,
                  profile=str(profile) if profile else None)
