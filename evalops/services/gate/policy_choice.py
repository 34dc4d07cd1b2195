"""Which policy of a kind governs a suite, given what the latest sync holds: the rule
itself, apart from how the rows are read.

evalops/services/gate/policies.py applies it to the ORM's rows (the gate, waivers, promotion);
the read path (evalops/services/reads/trials.py, `trials list`) to plain SQL rows, without
importing SQLAlchemy. One rule, so the two can never disagree on which policy governs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeVar

from evalops.errors import InputError

PolicyKind = Literal["gate_policy", "suite_policy"]
KIND_WORDS = {"gate_policy": "gate policy", "suite_policy": "suite policy"}

Row = TypeVar("Row")


def choose_policy(
    kind: PolicyKind,
    suite: tuple[str, str],
    named: tuple[str | None, Row | None],
    in_force: Mapping[str, tuple[int, Row]],
    *,
    newest_when_several: bool = False,
) -> Row:
    """The registered row of the policy of `kind` that governs a suite.

    `suite` is (its id, its file path), for messages; `named` is (the policy id its
    declaration names, or None; that policy's row in force, or None); `in_force` maps every
    policy of `kind` in force to (its row's id, the row): read only when the suite names
    none, the row id telling which was registered last. `newest_when_several` is the rule
    stored decisions were made under before suites named their policies (the newest
    registered in force).
    """
    suite_id, file_path = suite
    named_id, named_row = named
    word = KIND_WORDS[kind]
    if named_id is not None:
        if named_row is None:
            raise InputError(
                f"suite {suite_id} names {kind} {named_id}, which is not in force "
                f"(no {word} with that id in the latest sync)",
                file_path,
                None,
                kind,
            )
        return named_row
    if not in_force:
        raise InputError(f"no {word} is in force (sync registry/policies/)")
    if len(in_force) > 1 and not newest_when_several:
        raise InputError(
            f"suite {suite_id} names no {kind} and {len(in_force)} are in force: "
            f"{', '.join(sorted(in_force))} (name one with `{kind}:` in the suite's declaration)",
            file_path,
            None,
            kind,
        )
    return max(in_force.values(), key=lambda pair: pair[0])[1]
