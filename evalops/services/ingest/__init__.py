"""Evidence in: TrialRecord JSONL ingested, harness runs imported, trials read and reconciled.

`records` is `evalops trials ingest`; `imports` is `evalops trials import inspect|promptfoo`;
`trials` reads trials and appends reconciliations; `voids` voids trials ingested by mistake
(never deleting them) and lists voids; `unsynced` names the registry file behind a
digest that is not registered.

The modules listed in `__all__` are this package's face: other packages import only those
(tests/contract/test_services_map.py).
"""

__all__ = ["imports", "records", "trials", "unsynced", "voids"]
