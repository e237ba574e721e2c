"""The SigV4 signer against botocore's own (an independent implementation of the same spec)."""

from __future__ import annotations

import datetime
import types
import urllib.parse

import botocore.auth
import botocore.credentials
from botocore.awsrequest import AWSRequest
from hypothesis import given, settings
from hypothesis import strategies as st

from thresher.sources.remote.sigv4 import Credentials, Signer

_KEY_CHARS = st.characters(codec="utf-8", exclude_categories=("Cs", "Cc"))


def _botocore(creds: Credentials, region: str, url: str) -> dict[str, str]:
    request = AWSRequest(method="GET", url=url)  # Range is sent unsigned
    request.context["client_config"] = types.SimpleNamespace(s3={"payload_signing_enabled": False})
    botocore.auth.S3SigV4Auth(botocore.credentials.Credentials(creds.access_key, creds.secret_key, creds.token),
                              "s3", region).add_auth(request)
    return dict(request.headers)


@settings(max_examples=60, deadline=None)
@given(key=st.text(_KEY_CHARS, min_size=1, max_size=40).filter(lambda k: not k.startswith("/")),
       region=st.sampled_from(["us-east-1", "eu-west-3", "ap-southeast-2"]),
       token=st.none() | st.text("abcdefXYZ0123456789+/=", min_size=1, max_size=60),
       port=st.sampled_from([None, 9000]))
def test_signatures_match_botocore(key: str, region: str, token: str | None, port: int | None) -> None:
    creds = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token)
    host = "bucket.s3.amazonaws.com" + (f":{port}" if port else "")
    path = "/" + urllib.parse.quote(key, safe="/")
    theirs = _botocore(creds, region, f"https://{host}{path}")
    when = datetime.datetime.strptime(theirs["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc)
    ours = Signer().headers(creds, region, host, path, when)
    assert ours["Authorization"] == theirs["Authorization"]
    assert ours["x-amz-content-sha256"] == theirs["X-Amz-Content-SHA256"] == "UNSIGNED-PAYLOAD"
    assert ours.get("x-amz-security-token") == theirs.get("X-Amz-Security-Token")


def test_the_signing_key_is_derived_once_per_day_and_region() -> None:
    signer = Signer()
    creds = Credentials("AKID", "hush-hush")
    day = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    a = signer.headers(creds, "us-east-1", "h", "/k", day)
    b = signer.headers(creds, "us-east-1", "h", "/k", day + datetime.timedelta(hours=1))
    assert len(signer._keys) == 1 and a["Authorization"] != b["Authorization"]
    signer.headers(creds, "eu-west-1", "h", "/k", day)
    signer.headers(creds, "us-east-1", "h", "/k", day + datetime.timedelta(days=1))
    assert len(signer._keys) == 3
    assert "hush-hush" not in repr(creds)
