"""Authority: signed acts judged against the authority in force, and signed rule changes.

`acts` signs, judges and stores acts; `rule_changes` checks that the commits bringing a rule
change are signed by a policy owner.

The modules listed in `__all__` are this package's face: other packages import only those
(tests/contract/test_services_map.py).
"""

__all__ = ["acts", "rule_changes"]
