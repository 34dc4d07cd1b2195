"""Use cases that join registry files, the store and the pure domain, grouped by capability.

Sub-packages: `gate`, `verify`, `authority`, `ingest`, `evidence`, `reports`, `registry`,
`reads` (each one's `__init__` says what it holds and which modules it offers). The flat
modules left here are helpers every capability shares: `database` (opening the registry
database), `destroy` (what a destructive operation would lose) and `placeholders` (refusing a
pasted command's placeholders).
"""
