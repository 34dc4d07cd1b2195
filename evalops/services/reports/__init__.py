"""Reports: the audit report's document, the changes of a decision since the baseline (which
`gate check` prints without the audit report), the failing-trial drill-down, suite cards and
the static registry site. Renderers in `evalops.report` turn these documents into HTML and
Markdown.

The modules listed in `__all__` are this package's face: other packages import only those
(tests/contract/test_services_map.py).
"""

__all__ = ["audit", "changes", "drilldown", "site", "suite_cards"]
