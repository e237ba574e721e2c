from __future__ import annotations

import pytest

from tests.dataset.spec import write_int_files


@pytest.fixture(scope="session")
def int_files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Real ArrayRecord files of encoded ints 0..38 (one of them empty)."""
    return write_int_files(str(tmp_path_factory.mktemp("ints")), [13, 0, 21, 5])
