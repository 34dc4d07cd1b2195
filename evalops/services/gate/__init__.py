"""The gate: which policies govern a suite, a decision's inputs loaded from the registry, the
decision made, stored and replayed, and the waivers it applies.

`check` is `evalops gate check|show|list|replay`; `inputs` loads a decision's inputs over the
ORM (the loader `gate check` uses); `listed_trials` lists a stored evaluator-4 decision's
trials again for its report; `input_parts` holds what both loaders share without
reading a database; `policies` and `policy_choice` are the one home of the rule that picks a
suite's gate and suite policy; `waivers` grants, lists and revokes waivers.

The modules listed in `__all__` are this package's face: other packages import only those
(tests/contract/test_services_map.py).
"""

__all__ = [
    "check",
    "definitions_at",
    "input_parts",
    "inputs",
    "listed_trials",
    "policies",
    "policy_choice",
    "waivers",
]
