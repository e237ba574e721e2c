from __future__ import annotations

from typing import Iterator

import pytest

from tests.sources.remote.s3_server import S3Server


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    """A moto S3 server on 127.0.0.1, shared by the tests of a module, stopped after."""
    with S3Server() as server:
        yield server
