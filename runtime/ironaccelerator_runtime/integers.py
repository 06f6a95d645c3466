"""What counts as an integer argument (a size, an offset, a dimension): the one test the trait surface
(``traits``), DLPack views (``dlpack``) and kernel arguments (``kernel_args``) share.  It imports nothing of the
runtime, so that each of them builds on it without importing another."""

from __future__ import annotations

import operator
from typing import Any


def _integer(v: Any) -> int | None:
    """``v`` as a Python int if it is an integer (an ``int`` or anything with ``__index__``, e.g. numpy
    integers) and not a ``bool``; else None.  Floats, strings, bytes and bools are not sizes."""
    if type(v) is int:
        return v
    if isinstance(v, bool):
        return None
    try:
        return operator.index(v)
    except TypeError:
        return None
