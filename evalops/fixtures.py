"""The former name of `evalops.cassette`, kept so harnesses written against it still import.

New code imports `from evalops.cassette import Cassette, ToolError`.
"""

from __future__ import annotations

from evalops.cassette import Cassette, ToolError

__all__ = ["Cassette", "ToolError"]
