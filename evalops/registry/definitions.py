"""Files -> validated definitions with their digests (docs/formats.md and docs/digests.md).

A file is validated by the plain checker of evalops/domain/spec_check.py first, and by the
pydantic models of evalops/domain/specs.py (the reference, which names every problem) only
when that checker does not accept it: a registry of valid files is read without importing
pydantic (`evalops validate`'s start-up, benchmarks/RESULTS.md). A definition's model is
built when something asks for it (`Definition.spec`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from evalops.domain import digests, spec_check
from evalops.domain.digests import spec_digest
from evalops.domain.limits import DIGEST_PATTERN, ID_PATTERN
from evalops.domain.spec_check import SPEC_KINDS
from evalops.domain.spec_rules import SpecValueError
from evalops.errors import InputError, InputErrors
from evalops.registry.load import Document, format_path, load_document

if TYPE_CHECKING:
    from pydantic import ValidationError

    from evalops.domain.specs import Strict

_DIGEST_FIELD = {
    "task": "task_digest",
    "execution_profile": "execution_digest",
    "grader_set": "grader_set_digest",
    "suite_policy": "policy_digest",
    "gate_policy": "policy_digest",
    "suite": "declaration_digest",
    "authority": "authority_digest",
}


@dataclass(frozen=True)
class Definition:
    """One validated spec file."""

    file: str
    kind: str
    value: dict[str, Any]
    document: Document = field(repr=False, compare=False)
    """The file as parsed: where `lines` come from."""
    model: Strict | None = field(default=None, repr=False, compare=False)
    """The pydantic model, when the file was validated with pydantic (else built by `spec`)."""

    @property
    def lines(self) -> dict[tuple[str | int, ...], int]:
        """The line of each node of the file, mapped when a message first needs one: a
        JSON file's map costs a second parse (`sync` of 10,000 unchanged files needs none)."""
        return self.document.lines

    @property
    def spec(self) -> Strict:
        """The file as its pydantic model (validated, so this cannot fail)."""
        if self.model is None:
            from evalops.domain.specs import SPEC_MODELS

            model = SPEC_MODELS[self.value["spec_schema_version"]].model_validate(self.value)
            object.__setattr__(self, "model", model)  # a cache: the value is unchanged
            return model
        return self.model

    @property
    def id(self) -> str:
        return str(self.value["id"])

    @property
    def digest_field(self) -> str:
        return _DIGEST_FIELD[self.kind]

    @cached_property
    def digest(self) -> str:
        """The kind's identity digest (section 4); a suite's declaration is hashed whole."""
        return spec_digest(self.kind, self.value)

    @cached_property
    def document_digest(self) -> str:
        return digests.document_digest(self.value)

    @property
    def revision(self) -> int | None:
        """A task's `revision`, a grader set's `version` (valid: a positive int)."""
        if self.kind == "task":
            return cast(int, self.value["revision"])
        if self.kind == "grader_set":
            return cast(int, self.value["version"])
        return None

    def digest_row(self) -> dict[str, Any]:
        """The `digest --json` entry."""
        row: dict[str, Any] = {"file": self.file, "kind": self.kind, "id": self.id}
        if self.revision is not None:
            row["revision" if self.kind == "task" else "version"] = self.revision
        row[self.digest_field] = self.digest
        if self.kind == "grader_set":
            row["grader_config_digests"] = {
                g["id"]: digests.grader_config_digest(g) for g in self.value["graders"]
            }
        if self.kind == "execution_profile":
            row["system_build"] = self.value["system_build"]
        return row


_PATTERN_HELP = {
    ID_PATTERN: "is not a valid id: lowercase letters, digits and . _ / -, starting with a "
    "letter or digit, at most 128 characters",
    DIGEST_PATTERN: "is not a digest: sha256: followed by 64 lowercase hex digits",
}


def _typos(errors: list[Any]) -> dict[int, str]:
    """Unknown fields that are a misspelt required field missing beside them (`stauts`
    where `status` is required, under the same parent): error index -> the field meant.
    Each unknown key takes the missing sibling closest to it, each missing field one key.
    Their missing-field errors say nothing the typo does not, and a headline naming only
    the missing field would hide the typo behind "(and 1 more)"."""
    from evalops.domain.suggestions import close_match

    missing: dict[tuple[Any, ...], list[str]] = {}
    for error in errors:
        if error["type"] == "missing" and error["loc"]:
            missing.setdefault(tuple(error["loc"][:-1]), []).append(str(error["loc"][-1]))
    meant: dict[int, str] = {}
    for i, error in enumerate(errors):
        if error["type"] != "extra_forbidden" or not error["loc"]:
            continue
        siblings = missing.get(tuple(error["loc"][:-1]), [])
        found = close_match(str(error["loc"][-1]), siblings)
        if found is not None:
            meant[i] = found
            siblings.remove(found)
    return meant


def _without_typos(errors: list[Any], *, typos_first: bool) -> tuple[list[Any], dict[int, str]]:
    """`errors` without each missing field a typo explains, and what each typo meant, by
    its index in the list returned. `typos_first` for a headline (the likeliest cause of
    the rest); else in pydantic's order."""
    meant = _typos(errors)
    explained = {(tuple(errors[i]["loc"][:-1]), name) for i, name in meant.items()}
    kept = [
        i
        for i, e in enumerate(errors)
        if not (
            e["type"] == "missing"
            and e["loc"]
            and (tuple(e["loc"][:-1]), str(e["loc"][-1])) in explained
        )
    ]
    if typos_first:
        kept.sort(key=lambda i: i not in meant)  # stable: typos first, each in its order
    return [errors[i] for i in kept], {n: meant[i] for n, i in enumerate(kept) if i in meant}


def _one_error(doc: Document, error: Any, meant: str | None = None) -> InputError:
    # pydantic marks dict-key errors with a "[key]" step; users think of the key itself.
    loc = tuple(p for p in error["loc"] if isinstance(p, str | int) and p != "[key]")
    message = str(error["msg"]).removeprefix("Value error, ")
    cause = error.get("ctx", {}).get("error")
    if isinstance(cause, SpecValueError):
        # Model-level validators name the field at fault below the model they check.
        loc = (*loc, *cause.loc)
        message = str(cause)
    if error["type"] == "extra_forbidden" and meant is not None:
        message = f"unknown field {loc[-1]!r}: did you mean {meant!r}? (a required field)"
    elif error["type"] == "extra_forbidden":
        message = f"unknown field {loc[-1]!r}"
    elif error["type"] == "missing":
        message = f"required field {loc[-1]!r} is missing"
    elif error["type"] == "literal_error":
        message = f"{error['input']!r} is not allowed: {message.lower()}"
    elif error["type"] == "string_pattern_mismatch":
        pattern = str(error.get("ctx", {}).get("pattern"))
        message = f"{error['input']!r} " + _PATTERN_HELP.get(pattern, message)
    elif str(error["type"]).endswith(("_type", "_parsing")) and "input" in error:
        message = f"{message}, got {_shortened(error['input'])}"
    return InputError(message, doc.path, doc.line_of(loc), format_path(loc))


def _shortened(value: Any, limit: int = 40) -> str:
    """A wrong value as an error shows it: its repr (which escapes what cannot be seen),
    cut to `limit` characters, since a hostile file's value may be megabytes long."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


def pydantic_errors(doc: Document, exc: ValidationError) -> list[InputError]:
    """Every problem pydantic found in a document, each at its file:line and field, in
    document order of discovery and without repeats."""
    out: list[InputError] = []
    seen: set[tuple[int | None, str | None, str]] = set()
    errors, meant = _without_typos(exc.errors(include_url=False), typos_first=False)
    for i, error in enumerate(errors):
        one = _one_error(doc, error, meant.get(i))
        key = (one.line, one.field, one.message)
        if key not in seen:
            seen.add(key)
            out.append(one)
    return out


def pydantic_error(doc: Document, exc: ValidationError) -> InputError:
    """The first problem, noting how many more there are (for one-error contexts)."""
    errors, meant = _without_typos(exc.errors(include_url=False), typos_first=True)
    first = _one_error(doc, errors[0], meant.get(0))
    if len(errors) > 1:
        first.message += f" (and {len(errors) - 1} more)"
    return first


def definition_from_document(doc: Document) -> Definition:
    """Validate a parsed document against the model its `spec_schema_version` names."""
    value = doc.value
    if not isinstance(value, dict):
        raise InputError("a spec file must hold a mapping", doc.path, doc.line_of(()))
    version = value.get("spec_schema_version")
    if version is None:
        raise InputError(
            "required field 'spec_schema_version' is missing", doc.path, 1, "spec_schema_version"
        )
    kind = SPEC_KINDS.get(version) if isinstance(version, str) else None
    if kind is None:
        known = ", ".join(SPEC_KINDS)
        raise InputError(
            f"unknown spec_schema_version {version!r} (known: {known})",
            doc.path,
            doc.line_of(("spec_schema_version",)),
            "spec_schema_version",
        )
    if spec_check.is_valid(value):
        return Definition(doc.path, kind, value, doc)
    # Not accepted by the plain checker (invalid, or a kind it does not cover): pydantic
    # decides, and names every problem.
    from pydantic import ValidationError

    from evalops.domain.specs import SPEC_MODELS

    try:
        spec = SPEC_MODELS[version].model_validate(value)
    except ValidationError as exc:
        # Every problem of the file at once: one run of `validate` shows them all.
        raise InputErrors.of(pydantic_errors(doc, exc)) from None
    return Definition(doc.path, kind, value, doc, spec)


def load_definition(path: Path, display: str | None = None) -> Definition:
    return definition_from_document(load_document(path, display))
