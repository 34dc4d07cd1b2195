"""Estimation: rates of the population an estimation suite samples, with honest intervals.

`inputs` loads an estimate's inputs (the build's trials through the gate's own loader and
rerun rule, each member's stratum, the suite's weights and frame); `records` is `evalops
estimate` and `estimate show|list|replay` (stored as `EST-n`, audited, replayed byte for
byte); `planning` is `estimate plan` (how many tasks and trials a question needs). The
statistics are pure (evalops/domain/estimation.py, evalops/domain/estimate_documents.py).

The modules listed in `__all__` are this package's face: other packages import only those.
"""

__all__ = ["inputs", "planning", "records"]
