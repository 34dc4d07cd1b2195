"""Size limits shared by the specs, the records and the command line (kept free of imports:
the CLI checks its arguments against them before anything heavy is loaded)."""

MAX_IDENTIFIER_CHARS = 256
"""A build name, run id, actor and any other identifier (indexed columns on every engine)."""

MAX_FREE_TEXT_CHARS = 4096
"""A title, a reason, a URI, a message."""

ID_PATTERN = r"^[a-z0-9][a-z0-9._/-]{0,127}$"
"""Every id a spec declares (a task, a suite, a principal ...): at most 128 characters."""

DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"
"""A digest as evalops writes it (docs/digests.md)."""

MAX_TOOL_CALLS = 10_000
"""Expected calls of a trajectory, and observed tool calls of a trial, at most."""
