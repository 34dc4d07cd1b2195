"""Size limits shared by the specs, the records and the command line (kept free of imports:
the CLI checks its arguments against them before anything heavy is loaded)."""

MAX_IDENTIFIER_CHARS = 256
"""A build name, run id, actor and any other identifier (indexed columns on every engine)."""

MAX_FREE_TEXT_CHARS = 4096
"""A title, a reason, a URI, a message."""
