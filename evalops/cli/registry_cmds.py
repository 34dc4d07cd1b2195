"""`evalops validate`, `digest`, `sync` and `schema export`: registry files in, digests out."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from evalops.cli.context import JsonFlag, add_row, echo_lines, emit, now, say, settings
from evalops.cli.signing import ActOption, PrintActOption, SignatureOption, SignWithOption
from evalops.domain.humanize import plural
from evalops.errors import EXIT_REFUSED, InputError, InputErrors

if TYPE_CHECKING:
    from evalops.cli.context import Settings
    from evalops.registry.snapshot import Snapshot

registry_app = typer.Typer(
    help='The registry\'s tracked branch and path (docs/authority.md, "The tracked branch").\n\n'
    "Example: evalops registry track --path registry --branch main",
    no_args_is_help=True,
)

schema_app = typer.Typer(
    help="JSON Schemas of the spec formats and the machine-readable outputs.\n\n"
    "Example: evalops schema export registry/schemas",
    no_args_is_help=True,
)

DirArg = Annotated[
    Path | None,
    typer.Argument(metavar="DIR", help="Registry directory (default: --registry, ./registry)."),
]


def _digest_table(rows: list[dict[str, object]], title: str) -> None:
    from evalops.cli.context import new_table
    from evalops.cli.tables import print_table

    table = new_table("file", "kind", "id", "digest", title=title)
    for row in rows:
        digest_key = next(k for k in row if k.endswith("_digest"))
        add_row(table, str(row["file"]), str(row["kind"]), str(row["id"]), str(row[digest_key]))
    print_table(table, shorten=("digest",), drop=("kind",))


def validate(ctx: typer.Context, directory: DirArg = None, json_flag: JsonFlag = False) -> None:
    """Validate every spec file of a registry, and their references; no database needed.

    Exit 2 when anything is wrong, listing every problem of every file in one run as
    `file:line: field: what` (at most 200; the rest are counted); `--json` lists them
    in `error.errors`.

    Example: evalops validate registry
    """
    from evalops.registry.snapshot import load_snapshot
    from evalops.services.registry.starter_check import registry_warnings

    state = settings(ctx, json_flag)
    snapshot = load_snapshot(directory or state.registry)
    rows = [d.digest_row() for d in snapshot.definitions]
    refused = _sync_refusals(state, snapshot)
    warnings = registry_warnings(snapshot.definitions) + [
        f"{error.one_line()}; `evalops sync` refuses the file as it is" for error in refused
    ]

    def human() -> None:
        # Valid files `sync` will still refuse: said on the line that says "ok", not only
        # in the warnings below it.
        but = f"; `evalops sync` would refuse {plural(len(refused), 'file')} (below)"
        ok = f"ok: {plural(len(rows), 'definition')} valid in {snapshot.root}"
        say(ok + (but if refused else ""))
        _warn(warnings)

    # `refusals`: each as `sync --json` would report it (its `error.errors` entries).
    refusals = [error.json_entry() for error in refused]
    emit(ctx, {"ok": True, "definitions": rows, "warnings": warnings, "refusals": refusals}, human)


def _sync_refusals(state: "Settings", snapshot: "Snapshot") -> list[InputError]:
    """Files `sync` would refuse for want of a new revision, by `sync`'s own rule, when the
    registry's database is a SQLite file at hand (validate needs no database: without one,
    nothing is said)."""
    from evalops.services.registry.ratchet import refusals
    from evalops.store.reader import open_sqlite

    reader = open_sqlite(state.db_url, lock_timeout=state.lock_timeout)
    if reader is None:
        return []
    try:
        return refusals(reader, snapshot.definitions)
    finally:
        reader.close()


def _warn(warnings: list[str]) -> None:
    for line in warnings:
        say(f"warning: {line}", err=True)


def _expand(paths: list[Path]) -> list[Path]:
    from evalops.registry.load import SPEC_SUFFIXES
    from evalops.registry.snapshot import spec_files

    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = spec_files(path) or sorted(
                p for p in path.rglob("*") if p.is_file() and p.name.endswith(SPEC_SUFFIXES)
            )
            files.extend(found)
        else:
            files.append(path)
    return files


def digest(
    ctx: typer.Context,
    files: Annotated[
        list[Path], typer.Argument(metavar="FILE", help="Spec files (or directories of them).")
    ],
    json_flag: JsonFlag = False,
) -> None:
    """Print each spec's digests (recipes in docs/digests.md); no database needed.

    Example: evalops digest registry/tasks/*.yaml --json
    """
    from evalops.registry.definitions import load_definition
    from evalops.registry.spec_sources import display_path

    settings(ctx, json_flag)
    rows: list[dict[str, object]] = []
    errors: list[InputError] = []
    for path in _expand(files):
        try:
            rows.append(load_definition(path, display_path(path)).digest_row())
        except InputError as exc:
            errors.append(exc)
    if errors:
        raise InputErrors.of(errors)
    if not rows:
        raise InputError("no spec files given")
    emit(ctx, rows, lambda: _digest_table(rows, "digests"))


def sync(
    ctx: typer.Context,
    directory: DirArg = None,
    allow_dirty: Annotated[
        bool,
        typer.Option(
            help="Register the work tree's files from a registry outside git or one whose "
            "files are not what its commit holds; recorded as dirty."
        ),
    ] = False,
    track: Annotated[
        str | None,
        typer.Option(
            "--track",
            metavar="BRANCH",
            help="The branch this registry follows (the first sync records it; on a "
            "detached HEAD, e.g. in CI, name the tracked branch).",
        ),
    ] = None,
    json_flag: JsonFlag = False,
) -> None:
    """Register every definition with its digests, file path and git commit.

    Definitions are read from the commit itself (git objects), never from the work tree.
    Refuses (exit 2) a registry outside git, or one with a file that is not what the
    commit holds (changed, staged, deleted, untracked, git-ignored, marked skip-worktree or
    assume-unchanged), naming every such file, unless --allow-dirty; and a file whose
    (id, revision) is registered with another digest. A re-sync of unchanged files changes
    nothing.

    A registry follows one path on one branch (the first sync records them; `evalops
    registry track` changes them): only a fast-forward of the last synced commit there
    changes what is in force. A sync of another branch or path registers its definitions
    by digest and changes nothing in force (its first line says so); rewritten history of
    the tracked branch is refused (exit 5). Under an authority, a rule change needs every
    commit that brought it signed by a policy owner (exit 5 otherwise; docs/authority.md).

    Example: evalops sync registry --track main
    """
    from evalops.registry.spec_sources import display_path
    from evalops.services.registry.starter_check import registry_warnings
    from evalops.services.registry.sync import read_for_sync, sync_registry

    state = settings(ctx, json_flag)
    root = directory or state.registry
    snapshot, provenance = read_for_sync(root, allow_dirty=allow_dirty)

    with state.connect() as engine:
        result = sync_registry(
            engine,
            snapshot,
            provenance,
            registry_path=display_path(snapshot.root),
            actor=state.who(),
            now=now(),
            track=track,
        )
    if result.refused is not None:
        emit(ctx, result.as_dict(), lambda: say(f"sync REFUSED: {result.refused}"))
        raise typer.Exit(EXIT_REFUSED)

    def human() -> None:
        tracked = result.tracked or {}
        if result.off_line is not None:
            say(result.off_line)
        if result.follow is not None:
            say(f"  {result.follow}")
        relabelled = {(e["kind"], e["id"]) for e in result.same_digest}
        for entry in result.registered:
            key = next(k for k in entry if k.endswith("_digest"))
            if (entry["kind"], entry["id"]) in relabelled:
                say(f"{entry['kind']} {entry['id']}: labels changed; same digest {entry[key]}")
            else:
                say(f"registered {entry['kind']} {entry['id']}: {entry[key]}")
        commit = (provenance.commit or "no commit")[:12]
        flag = " (dirty)" if provenance.dirty else ""
        say(
            f"{len(result.registered)} registered, {result.unchanged} unchanged "
            f"at git {commit}{flag}"
        )
        if result.started_tracking:
            say(
                f"tracking {tracked['branch']} at {str(tracked['path']).rstrip('/')}/: from now "
                "on only its commits change what is in force (`evalops registry track "
                "--branch B` changes that)"
            )
        for entry in result.back_in_force:
            say(f"back in force: {entry['kind']} {entry['id']}")
        for entry in result.now_in_force:
            say(f"now in force: {entry['kind']} {entry['id']} (registered before)")
        for entry in result.no_longer_in_force:
            say(f"no longer in force: {entry['kind']} {entry['id']}")
        if result.authority_bootstrap and result.sync_run is not None:
            say(
                "authority in force from now on: acts need signatures "
                "(--sign-with; docs/authority.md)"
            )
        _warn(warnings)

    registered = {(str(e["kind"]), str(e["id"])) for e in result.registered}
    warnings = registry_warnings(snapshot.definitions, only=registered)
    emit(ctx, {**result.as_dict(), "warnings": warnings}, human)


@registry_app.command("track")
def track(
    ctx: typer.Context,
    path: Annotated[
        str | None,
        typer.Option(
            "--path",
            metavar="P",
            help="The registry path, relative to the top of "
            "its git repository (default: unchanged).",
        ),
    ] = None,
    branch: Annotated[
        str | None,
        typer.Option("--branch", metavar="B", help="The branch to follow (default: unchanged)."),
    ] = None,
    sign_with: SignWithOption = None,
    print_act: PrintActOption = False,
    act: ActOption = None,
    signature: SignatureOption = None,
    json_flag: JsonFlag = False,
) -> None:
    """Change the branch and path whose syncs change what is in force.

    With an authority in force this is a rule change: a policy owner's signed act
    `registry.track` (--sign-with KEY, or --print-act then --act/--signature); unsigned or
    signed by anyone else it is refused (exit 5, audited). The next sync of the new line
    needs no ancestry with the old one (a rewritten history is re-based this way); its
    rule-change check starts after every commit synced clean before.

    Example: evalops registry track --branch main --sign-with ~/.ssh/id_ed25519
    """
    from evalops.cli.signing import printing_act, signing_of
    from evalops.services.registry.tracking import track_registry

    state = settings(ctx, json_flag)
    signing = signing_of(sign_with, print_act, act, signature)
    with state.connect() as engine, printing_act():
        result = track_registry(
            engine, path=path, branch=branch, signing=signing, actor=state.who(), now=now()
        )

    if branch is not None:
        _note_unknown_branch(state.registry, branch)

    def human() -> None:
        before = result.previous.describe() if result.previous else "nothing tracked"
        say(f"tracked: {result.line.describe()} (was: {before})")
        for signer in result.signers:
            say(f"signed by {signer['principal']} ({signer['fingerprint']})")
        say("next: evalops sync registry (on the tracked branch)")

    emit(ctx, result.as_dict(), human)


@registry_app.command("show")
def show(ctx: typer.Context, json_flag: JsonFlag = False) -> None:
    """What this registry follows and what is in force: the tracked branch and path, the
    sync whose commit's definitions are in force, the authority in force, the registry id.

    Example: evalops registry show --json
    """
    from evalops.services.registry.tracking import registry_state

    state = settings(ctx, json_flag)
    with state.connect() as engine:
        data = registry_state(engine)

    def human() -> None:
        tracked = data["tracked"]
        if tracked is None:
            say("nothing synced yet: the first `evalops sync` chooses the branch and path")
        else:
            branch = tracked["branch"] or "(no branch: synced outside git or detached)"
            how = (
                "set by `registry track`"
                if data["tracked_by"] == "registry track"
                else "chosen by the first sync"
            )
            say(f"tracking {branch} at {tracked['path'].rstrip('/')}/ ({how})")
        run = data["in_force"]
        if run is not None:
            commit = (run["git_commit"] or "no commit")[:12]
            dirty = ", dirty work tree" if run["dirty"] else ""
            kinds = ", ".join(f"{n} {k}" for k, n in run["definitions"].items())
            # A CI checkout is detached: `sync --track main` names the branch git could not.
            tracked_branch = (data["tracked"] or {}).get("branch")
            on = run["git_branch"] or (
                f"a detached HEAD synced as {tracked_branch}" if tracked_branch else "no branch"
            )
            say(
                f"in force: sync {run['sync_run']} of {commit} on {on}"
                f"{dirty}, {run['at']} by {run['actor']} (audit seq {run['audit_seq']}): {kinds}"
            )
        authority = data["authority"]
        say(
            f"authority: {authority['id']} {authority['digest']}"
            if authority
            else "authority: none (acts need no signatures)"
        )
        say(f"registry id: {data['registry_id'] or 'none yet'}")

    emit(ctx, data, human)


def _note_unknown_branch(registry: Path, branch: str) -> None:
    """A branch this repository does not have is tracked all the same (CI may track a
    branch its clone did not fetch), but a typo would leave every sync "in force
    unchanged" with no word why: say so on stderr."""
    from evalops.registry.history import branch_known

    here = registry if registry.is_dir() else Path.cwd()
    if branch_known(here, branch) is False:
        say(
            f"note: this repository has no branch {branch}, local or "
            "remote-tracking: nothing changes what is in force until a sync on it",
            err=True,
        )


@schema_app.command("export")
def schema_export(
    ctx: typer.Context,
    directory: Annotated[
        Path, typer.Argument(metavar="DIR", help="Where to write the *.schema.json files.")
    ],
    json_flag: JsonFlag = False,
) -> None:
    """Write JSON Schemas for every spec format, TrialRecord and the import map, and for
    the machine-readable outputs: gate check --json, the audit report's JSON,
    verify-attestation --json and the EvalSummary export.

    Example: evalops schema export registry/schemas
    """
    from evalops.services.registry.schemas import export_schemas

    settings(ctx, json_flag)
    written = [str(p) for p in export_schemas(directory)]
    emit(ctx, {"written": written}, echo_lines([f"wrote {p}" for p in written]))


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)
    app.command("digest")(digest)
    app.command("sync")(sync)
    app.add_typer(schema_app, name="schema")
    app.add_typer(registry_app, name="registry")
