"""Verification: what the database holds is exactly what its audit chain recorded.

`run` is `evalops verify`; `reads` checks the chain, definitions, trials and rows through a
`Reader`; `act_checks` re-verifies every signed act; `decision_checks` replays every stored
decision and rebuilds its inputs with `gate_inputs`, the second loader, written apart from
`evalops.services.gate.inputs` on purpose; `anchors` keeps chain anchors outside the
database; `attest` certifies a decision that verifies; `upgrade_checks` is what `db upgrade`
checks first; `storage_checks` checks the storage itself (SQLite's integrity, the unique keys);
`estimate_checks` recomputes every stored estimate from its inputs.

The modules listed in `__all__` are this package's face: other packages import only those
(tests/contract/test_services_map.py).
"""

__all__ = [
    "act_checks",
    "anchors",
    "attest",
    "decision_checks",
    "estimate_checks",
    "gate_inputs",
    "reads",
    "rule_history",
    "run",
    "separation_checks",
    "storage_checks",
    "upgrade_checks",
]
