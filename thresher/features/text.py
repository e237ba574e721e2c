"""Text: a Unicode string, stored as UTF-8; decodes to ``str``.

Example:
    >>> from thresher.features import Text
    >>> t = Text()
    >>> p = t.encode_payload("héllo")
    >>> t.decode_payload(p, 0, len(p))
    'héllo'
"""

from __future__ import annotations

from typing import Any

from thresher.errors import FeatureError
from thresher.features.base import Feature

__all__ = ["Text"]


class Text(Feature):
    """A string (``str``; ``bytes`` must be valid UTF-8).

    Example:
        >>> from thresher.features import Text
        >>> Text()
        Text()
    """

    type_name = "Text"

    def __repr__(self) -> str:
        return "Text()"

    def __eq__(self, other: object) -> bool:
        return type(other) is Text

    def __hash__(self) -> int:
        return hash(self.type_name)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type_name}

    def encode_payload(self, value: Any, where: str = "value") -> bytes:
        if isinstance(value, str):
            return value.encode("utf-8")
        if isinstance(value, (bytes, bytearray)):
            try:
                bytes(value).decode("utf-8")
            except UnicodeDecodeError as e:
                raise FeatureError(f"{where}: Text bytes are not valid UTF-8 ({e})") from None
            return bytes(value)
        raise FeatureError(f"{where}: Text expects a str, got {type(value).__name__}")

    def decode_payload(self, buf: bytes, offset: int, length: int) -> Any:
        try:
            return str(memoryview(buf)[offset:offset + length], "utf-8")
        except UnicodeDecodeError as e:
            raise self._bad_payload(length, f"not UTF-8 ({e})") from None
