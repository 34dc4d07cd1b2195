"""Pure translations of other tools' logs (Inspect AI, promptfoo) into trial records.

A regular package (not a namespace one) so the import-layer contracts in pyproject.toml see
these modules; see ARCHITECTURE.md.
"""
