"""Frozen evaluators of earlier releases, kept so that a stored decision replays under the
rules it was made under (a decision's inputs name their evaluator; see `domain.gate`).

Never change these modules: a change here would make old decisions fail `verify`.
"""
