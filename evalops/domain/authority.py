"""Signed acts: who may sign what under an authority, judged from the bytes alone.

An act is the canonical JSON of exactly what a command stores plus `act` (its kind),
`act_id` (a random UUID), `signed_at`, `authority_digest` and `registry_id` (the registry
it is an act of), followed by one newline: the
bytes `ssh-keygen -Y sign -n evalops` signs. A command rebuilds the act it would store
and accepts the signed one only when the two are the same bytes, so a signature can never
be carried over to anything else. Time is a parameter; nothing here reads a clock.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any, Protocol, cast

from evalops.domain.act_roles import ACT_ROLES, DEFAULT_THRESHOLDS, ActKind, Role
from evalops.domain.canonical import canonical_json
from evalops.domain.timestamps import parse_timestamp

if TYPE_CHECKING:
    from evalops.domain import sshsig
    from evalops.domain.specs import AuthoritySpec

NAMESPACE = "evalops"
META_FIELDS = ("act", "act_id", "signed_at", "authority_digest", "registry_id")
#: The fields every act has; `registry_id` too, except in acts stored before registries had
#: ids (`verify` accepts those as they were signed).
REQUIRED_FIELDS = ("act", "act_id", "signed_at", "authority_digest")
#: Bounds of act input (docs/authority.md, "Bounded act input"; the specs' nesting limit).
MAX_ACT_BYTES = 1024 * 1024
MAX_SIGNATURE_BYTES = 64 * 1024
MAX_NESTING = 64
#: An act_id as `uuid.uuid4()` spells it (any version, lower case).
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: Clocks of the signer's machine and of the recording one may disagree this much.
CLOCK_SKEW = timedelta(minutes=5)


class GrantFacts(Protocol):
    """A role grant (`RoleGrant`), as judging a signature reads it."""

    @property
    def principal(self) -> str: ...
    @property
    def suites(self) -> Sequence[str]: ...
    @property
    def tasks(self) -> Sequence[str]: ...


class PrincipalFacts(Protocol):
    """A principal (`Principal`): its id and its OpenSSH public keys."""

    @property
    def id(self) -> str: ...
    @property
    def keys(self) -> Sequence[str]: ...


class AuthorityFacts(Protocol):
    """What judging signatures reads of an authority: the spec model (`AuthoritySpec`), or
    the read-only view of a stored one (evalops/domain/stored_authority.py) with which
    `verify` re-checks stored acts without the spec models."""

    @property
    def principals(self) -> Sequence[PrincipalFacts]: ...
    @property
    def roles(self) -> Mapping[Role, Sequence[GrantFacts]]: ...
    @property
    def thresholds(self) -> Mapping[ActKind, int]: ...


class MalformedAct(ValueError):
    """An act file that is not an act at all (a usage error, not a refusal)."""


def act_bytes(act: Mapping[str, Any]) -> bytes:
    """The exact bytes signed for `act`."""
    return canonical_json(dict(act)) + b"\n"


def compose(
    kind: str,
    body: Mapping[str, Any],
    *,
    act_id: str,
    signed_at: str,
    authority_digest: str,
    registry_id: str,
) -> dict[str, Any]:
    return {
        **body,
        "act": kind,
        "act_id": act_id,
        "signed_at": signed_at,
        "authority_digest": authority_digest,
        "registry_id": registry_id,
    }


def nesting_exceeds(text: str, limit: int = MAX_NESTING) -> bool:
    """Does JSON `text` nest arrays and objects deeper than `limit`? (A scan, no recursion:
    200,000 brackets must be a usage error, not the parser's RecursionError.)"""
    depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False


def nesting_may_exceed(text: str, limit: int = MAX_NESTING) -> bool:
    """Whether `text` holds more opening brackets and braces than `limit`. A depth is never
    more than that count, so below it `nesting_exceeds` has nothing to find: counting runs
    at C speed, where the scan cost a fifth of re-verifying one signed act."""
    return text.count("[") + text.count("{") > limit


def read_act(data: bytes, *, stored: bool = False) -> dict[str, Any]:
    """An act file's JSON object with its act fields (MalformedAct otherwise). `stored`:
    an act `verify` reads back, which may predate `registry_id`."""
    if len(data) > MAX_ACT_BYTES:
        raise MalformedAct(f"an act is at most 1 MiB ({MAX_ACT_BYTES} bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedAct(f"not a JSON act: {exc}") from None
    if nesting_may_exceed(text) and nesting_exceeds(text):
        raise MalformedAct(f"the act is nested deeper than {MAX_NESTING} levels")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise MalformedAct(f"not a JSON act: {exc}") from None
    if not isinstance(value, dict):
        raise MalformedAct("an act is a JSON object")
    for name in REQUIRED_FIELDS if stored else META_FIELDS:
        if not isinstance(value.get(name), str):
            raise MalformedAct(f"the act has no {name!r}")
    if "registry_id" in value and not isinstance(value["registry_id"], str):
        raise MalformedAct("the act's registry_id is not a string")
    if _UUID.fullmatch(value["act_id"]) is None:
        raise MalformedAct(
            f"act_id is a UUID (as --print-act writes it), not {value['act_id'][:40]!r}"
        )
    try:
        parse_timestamp(value["signed_at"])
    except ValueError as exc:
        raise MalformedAct(f"signed_at: {exc}") from None
    return value


@dataclass(frozen=True)
class Scope:
    """What an act touches, for scoped role grants."""

    suite: str | None = None
    task: str | None = None
    builds: tuple[str, ...] = ()
    """The builds whose trials an ingest brought (for separation of duties)."""
    suites: tuple[str, ...] = ()
    """Every suite an act touches, when it may touch several (a void): each signer holds
    the role for one of them at least, and every one of them has a signer who does.
    `NO_SUITE` among them stands for tasks in no suite, which only an unscoped grant
    covers."""
    threshold: str | None = None
    """The thresholds key that counts the signers, when not the act's kind
    (`trials.void_hard`)."""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"suite": self.suite, "task": self.task}
        if self.builds:
            out["builds"] = list(self.builds)
        if self.suites:
            out["suites"] = list(self.suites)
        if self.threshold is not None:
            out["threshold"] = self.threshold
        return out

    @classmethod
    def of(cls, fields: Mapping[str, Any]) -> Scope:
        """The Scope a stored `as_dict` describes."""
        return cls(
            fields.get("suite"),
            fields.get("task"),
            tuple(fields.get("builds", ())),
            tuple(fields.get("suites", ())),
            fields.get("threshold"),
        )


@dataclass(frozen=True)
class Signer:
    principal: str
    fingerprint: str

    def as_dict(self) -> dict[str, str]:
        return {"principal": self.principal, "fingerprint": self.fingerprint}


@dataclass
class Judgement:
    """Signers when the act stands; else the first reason it does not (and its rule)."""

    signers: list[Signer] = field(default_factory=list)
    refusal: str | None = None
    rule: str = "authority"

    @property
    def ok(self) -> bool:
        return self.refusal is None


NO_SUITE = ""
"""In `Scope.suites`: the act also touches tasks that are in no suite."""


def suite_names(suites: Sequence[str]) -> str:
    """Suites of a scope as a refusal names them (`NO_SUITE` as what it stands for)."""
    return ", ".join(repr(s) if s != NO_SUITE else "tasks in no suite" for s in suites)


def _grant_covers(grant: GrantFacts, scope: Scope) -> bool:
    """An unscoped grant covers every act; a scoped one only acts inside its globs (an act
    with no suite or no task is outside a grant scoped by suites or tasks: fail closed).
    An act on several suites is covered when one of them is (`suites_uncovered` then
    requires every suite to have a signer)."""
    if scope.suites:
        return any(
            _grant_covers(grant, Scope(suite=s or None, task=scope.task)) for s in scope.suites
        )
    for globs, value in ((grant.suites, scope.suite), (grant.tasks, scope.task)):
        if globs and (value is None or not any(fnmatchcase(value, g) for g in globs)):
            return False
    return True


def key_owners(authority: AuthorityFacts) -> dict[bytes, str]:
    """Key identity (`sshsig.identity`: one key whatever its encoding) -> principal id."""
    from evalops.domain import sshsig

    return {
        sshsig.identity(sshsig.parse_public_key(line)): p.id
        for p in authority.principals
        for line in p.keys
    }


def owner_of(owners: Mapping[bytes, str], key: sshsig.PublicKey) -> str | None:
    """The principal whose key `key` is, in whichever encoding a signature carries it."""
    found = owners.get(key.blob)
    if found is None:
        from evalops.domain import sshsig

        try:
            found = owners.get(sshsig.identity(key))
        except sshsig.MalformedKey:
            return None
    return found


def signatures_needed(authority: AuthorityFacts, counted: str) -> int:
    """How many distinct principals must sign an act counted under `counted` (its kind, or
    the thresholds key its scope names): the authority's threshold, else the default."""
    thresholds = cast("Mapping[str, int]", authority.thresholds)
    return int(thresholds.get(counted, DEFAULT_THRESHOLDS.get(counted, 1)))


def who_may_sign(authority: AuthorityFacts, kind: str, scope: Scope) -> list[str]:
    """The principals whose role covers an act `kind` in `scope`, in declaration order."""
    return [
        p.id for p in authority.principals if role_refusal(authority, p.id, kind, scope) is None
    ]


def role_refusal(authority: AuthorityFacts, principal: str, kind: str, scope: Scope) -> str | None:
    role = ACT_ROLES[kind]
    grants = [g for g in authority.roles.get(role, []) if g.principal == principal]
    if not grants:
        return f"principal {principal!r} does not hold {role}, which {kind} needs"
    if not any(_grant_covers(g, scope) for g in grants):
        where = ", ".join(
            f"{k} {v!r}" for k, v in (("suite", scope.suite), ("task", scope.task)) if v is not None
        )
        if scope.suites:
            where = "any of suites " + suite_names(scope.suites)
        return f"principal {principal!r} holds {role} but not for {where or 'this act'}"
    return None


def suites_uncovered(
    authority: AuthorityFacts, kind: str, scope: Scope, principals: Sequence[str]
) -> list[str]:
    """The suites of a several-suite scope for which none of `principals` holds the role."""
    role = ACT_ROLES[kind]
    grants = [g for g in authority.roles.get(role, []) if g.principal in principals]
    return [
        s
        for s in scope.suites
        if not any(_grant_covers(g, Scope(suite=s or None, task=scope.task)) for g in grants)
    ]


def check_signatures(
    authority: AuthorityFacts,
    kind: str,
    data: bytes,
    signatures: Sequence[bytes],
    scope: Scope,
    owners: Mapping[bytes, str] | None = None,
) -> Judgement:
    """Every signature valid, by a known key whose principal holds the role for the scope,
    and enough distinct principals. Raises sshsig.MalformedSignature on a broken file.
    `owners` is `key_owners(authority)` when the caller already has it."""
    return SignatureJudge(authority, owners).check(kind, data, signatures, scope)


#: At most this many (principal, kind, scope) role refusals kept by one `SignatureJudge`.
ROLE_MEMO = 4096


class SignatureJudge:
    """`check_signatures` under one authority, for a caller that checks many acts (`verify`):
    what does not depend on the act is worked out once per judge, not once per act: the
    key owners, each owner's `Signer` (its fingerprint), each (principal, kind, scope)'s
    role refusal, and the parse of the authority's own Ed25519 signatures
    (`sshsig.Verifier`). Every signature is still verified each time `check` runs."""

    def __init__(self, authority: AuthorityFacts, owners: Mapping[bytes, str] | None = None):
        self.authority = authority
        from evalops.domain import sshsig

        self.owners = key_owners(authority) if owners is None else owners
        self._verifier = sshsig.Verifier(self.owners, NAMESPACE)
        self._signers: dict[bytes, Signer] = {}
        self._roles: dict[tuple[str, str, Scope], str | None] = {}

    def _role_refusal(self, principal: str, kind: str, scope: Scope) -> str | None:
        at = (principal, kind, scope)
        try:
            return self._roles[at]
        except KeyError:
            refusal = role_refusal(self.authority, principal, kind, scope)
            if len(self._roles) < ROLE_MEMO:  # ingests' scopes name builds: may all differ
                self._roles[at] = refusal
            return refusal
        except TypeError:  # a scope read from a stored row may hold lists: not kept
            return role_refusal(self.authority, principal, kind, scope)

    def _signer(self, principal: str, key: sshsig.PublicKey) -> Signer:
        # `principal` is owners[key.blob]: one per key blob.
        found = self._signers.get(key.blob)
        if found is None:
            found = self._signers[key.blob] = Signer(principal, key.fingerprint)
        return found

    def check(self, kind: str, data: bytes, signatures: Sequence[bytes], scope: Scope) -> Judgement:
        """`check_signatures` of one act."""
        signers: list[Signer] = []
        for number, signature in enumerate(signatures, 1):
            reason, key = self._verifier.check(signature, data)
            if reason is not None:
                return Judgement(refusal=f"signature {number}: {reason}")
            principal = owner_of(self.owners, key)
            if principal is None:
                return Judgement(
                    refusal=f"signature {number}: key {key.fingerprint} is not a key of any "
                    "principal of the authority in force"
                )
            problem = self._role_refusal(principal, kind, scope)
            if problem is not None:
                return Judgement(refusal=f"signature {number}: {problem}")
            signer = self._signer(principal, key)
            if signer not in signers:
                signers.append(signer)
        if not signatures:
            return Judgement(refusal=f"{kind} is unsigned and an authority is in force")
        counted = scope.threshold or kind
        # A scope's own threshold only ever adds signers: a void of hard failures needs
        # what a void needs and what hiding a hard failure needs, whichever is more.
        needed = max(
            signatures_needed(self.authority, counted), signatures_needed(self.authority, kind)
        )
        principals = sorted({s.principal for s in signers})
        if len(principals) < needed:
            named = kind if counted == kind else f"{kind} ({counted})"
            return Judgement(
                refusal=f"{named} needs {needed} distinct signers, has {len(principals)} "
                f"({', '.join(principals)})",
                rule="threshold",
            )
        uncovered = suites_uncovered(self.authority, kind, scope, principals)
        if uncovered:
            unscoped = " (tasks in no suite: an unscoped grant)" if NO_SUITE in uncovered else ""
            return Judgement(
                refusal=f"no signer holds {ACT_ROLES[kind]} for suite "
                f"{suite_names(uncovered)}: a {kind} needs one of each suite it touches" + unscoped
            )
        return Judgement(signers=signers)


def judge(
    *,
    kind: str,
    body: Mapping[str, Any],
    data: bytes,
    signatures: Sequence[bytes],
    authority: AuthoritySpec,
    authority_digest: str,
    scope: Scope,
    now: datetime,
    registry_id: str,
) -> Judgement:
    """May this signed act be stored now, in the registry `registry_id`? (replay and
    separation of duties are the caller's: they need what is stored)."""
    act = read_act(data)
    if act["act"] != kind:
        return Judgement(refusal=f"the act is a {act['act']} act, not {kind}")
    if act["registry_id"] != registry_id:
        return Judgement(
            refusal=f"the act is an act of registry {act['registry_id']}, not of this one "
            f"({registry_id}): an act belongs to the registry it was printed by",
            rule="registry",
        )
    expected = compose(
        kind,
        body,
        act_id=act["act_id"],
        signed_at=act["signed_at"],
        authority_digest=act["authority_digest"],
        registry_id=registry_id,
    )
    if act_bytes(expected) != data:
        return Judgement(refusal=_difference(act, expected))
    if act["authority_digest"] != authority_digest:
        return Judgement(
            refusal=f"the act was signed under authority {act['authority_digest']}, "
            f"not the one in force ({authority_digest})"
        )
    signed_at = parse_timestamp(act["signed_at"])
    if signed_at > now + CLOCK_SKEW:
        return Judgement(refusal=f"the act is signed at {act['signed_at']}, in the future")
    if now - signed_at > timedelta(days=authority.max_act_age_days):
        return Judgement(
            refusal=f"the act was signed at {act['signed_at']}, more than "
            f"max_act_age_days {authority.max_act_age_days} ago"
        )
    return check_signatures(authority, kind, data, signatures, scope)


def _difference(act: Mapping[str, Any], expected: Mapping[str, Any]) -> str:
    for name in sorted(act.keys() | expected.keys()):
        if act.get(name) != expected.get(name):
            return (
                f"the act differs from what this command would store: {name} is "
                f"{json.dumps(act.get(name))} in the act, {json.dumps(expected.get(name))} here"
            )
    return "the act's bytes differ from the canonical JSON of what this command would store"


def judge_commit(
    authority: AuthoritySpec, sha: str, payload: bytes, signature: bytes | None
) -> tuple[str | None, Signer | None]:
    """(why a commit that changes the rules is not a policy owner's, None: it is; its signer).

    git signs commits in the SSHSIG namespace `git`; a policy_owner grant scoped to some
    suites or tasks does not cover rule changes (they reach every suite).
    """
    short = sha[:12]
    if signature is None:
        return (
            f"commit {short} is not SSH-signed (git config gpg.format ssh, then sign it: "
            "`git commit --amend -S --no-edit` for the last commit, or `git rebase --exec "
            "'git commit --amend -S --no-edit' LAST_SYNCED` for every commit since the last "
            "sync)",
            None,
        )
    from evalops.domain import sshsig

    try:
        check = sshsig.verify(signature, payload, "git")
    except sshsig.MalformedSignature as exc:
        return f"commit {short} carries a malformed SSH signature: {exc}", None
    if not check.valid:
        return f"commit {short}: {check.reason}", None
    key = check.signature.public_key
    principal = owner_of(key_owners(authority), key)
    if principal is None:
        return f"commit {short} is signed by key {key.fingerprint}, no principal's", None
    grants = [g for g in authority.roles.get("policy_owner", []) if g.principal == principal]
    if not any(_grant_covers(g, Scope()) for g in grants):
        return f"commit {short} is signed by {principal!r}, who is not a policy_owner", None
    return None, Signer(principal, key.fingerprint)
