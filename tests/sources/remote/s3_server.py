"""A real S3-compatible server on 127.0.0.1 for tests and benchmarks: moto in server mode.

Started as a subprocess on a free port and stopped by ``stop()`` (or the ``with`` block).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from typing import Any, Optional

import boto3

from tests.sources.remote.range_server import free_port, stop_process

KEY = SECRET = "testing"


class S3Server:
    """``moto_server`` on a free port; ``enforce_auth`` makes it refuse unknown credentials."""

    def __init__(self, enforce_auth: bool = False, port: Optional[int] = None) -> None:
        self.port = port or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ)
        if enforce_auth:
            env["INITIAL_NO_AUTH_ACTION_COUNT"] = "0"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(self.endpoint + "/moto-api/", timeout=1).close()
                break
            except Exception:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"moto server on port {self.port} did not start")
                time.sleep(0.1)

    def storage_options(self, key: str = KEY, secret: str = SECRET,
                        endpoint: Optional[str] = None) -> dict[str, Any]:
        return {"key": key, "secret": secret, "client_kwargs": {
            "endpoint_url": endpoint or self.endpoint, "region_name": "us-east-1"}}

    def new_bucket(self) -> str:
        name = f"b-{uuid.uuid4().hex[:12]}"
        boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=KEY,
                     aws_secret_access_key=SECRET, region_name="us-east-1"
                     ).create_bucket(Bucket=name)
        return name

    def pause(self) -> None:
        """Freezes the server: connections are accepted, nothing is answered."""
        self.process.send_signal(signal.SIGSTOP)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
        stop_process(self.process)

    def __enter__(self) -> "S3Server":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
