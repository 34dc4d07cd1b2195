"""Frozen evaluators of earlier releases, kept so that a stored decision replays under the
rules it was made under (a decision's inputs name their evaluator; `domain.evaluators`
lists every version).

Each frozen evaluator comes with its own copy of every rule, vocabulary and model it reads,
and these modules import nothing of evalops outside this package (an import-linter contract
in pyproject.toml): a change to a live rule never reaches them. Never change these modules:
a change here would make old decisions fail `verify`.
"""
