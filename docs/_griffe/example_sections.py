"""A griffe extension for the API pages: thresher's docstrings head their doctests with
``Example:``, which griffe's Google parser reads as an admonition (its doctest lines then
become Markdown); it reads ``Examples:`` as code. This renames the heading before parsing."""

from __future__ import annotations

import re
from typing import Any

import griffe

_HEADING = re.compile(r"^(\s*)Example:\s*$", re.MULTILINE)


class ExampleSections(griffe.Extension):
    """Reads a docstring's ``Example:`` section as griffe's ``Examples:`` section."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _HEADING.sub(r"\1Examples:", obj.docstring.value)
