"""`evalops export junit|otel|summary|attestation` and `evalops verify-attestation`."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from evalops.cli.context import JsonFlag, echo_lines, emit, note, now, settings
from evalops.cli.gate import EXIT_BY_DECISION
from evalops.cli.output import OutputOption, write_output
from evalops.errors import EXIT_VERIFY, InputError, VerificationError

if TYPE_CHECKING:
    from evalops.report.document import ReportDocument

export_app = typer.Typer(
    help="Exports of a stored gate decision: JUnit XML, OTLP JSON logs, RFC 0244 "
    "EvalSummary, in-toto attestation.\n\nExample: evalops export junit --gate GATE-3 -o "
    "gate.xml",
    no_args_is_help=True,
)

GateOption = Annotated[str, typer.Option("--gate", help="Stored gate decision id (GATE-<n>).")]


def _document(ctx: typer.Context, gate: str, json_flag: bool) -> "ReportDocument":
    from evalops.services.reports.audit import audit_document

    state = settings(ctx, json_flag)
    with state.connect() as engine:
        return audit_document(engine, gate, now=now())


def _finish(ctx: typer.Context, what: str, doc: "ReportDocument", output: str, text: str) -> None:
    path = write_output(output, text)
    if path is not None:
        emit(
            ctx,
            {
                "gate_id": doc["gate_id"],
                "export": what,
                "path": path,
                "audit_head": doc["audit_head"],
            },
            lambda: note(f"wrote {what} of {doc['gate_id']} to {path}"),
        )


@export_app.command("junit")
def junit(
    ctx: typer.Context, gate: GateOption, output: OutputOption = "-", json_flag: JsonFlag = False
) -> None:
    """JUnit XML: a testcase per member task and one `gate-decision` case that fails unless
    the decision is pass.

    Example: evalops export junit --gate GATE-3 -o gate.xml
    """
    from evalops.export.junit import junit_xml

    doc = _document(ctx, gate, json_flag)
    _finish(ctx, "junit", doc, output, junit_xml(doc))


@export_app.command("otel")
def otel(
    ctx: typer.Context, gate: GateOption, output: OutputOption = "-", json_flag: JsonFlag = False
) -> None:
    """OTLP JSON logs: one gen_ai.evaluation.result event per trial.

    Example: evalops export otel --gate GATE-3 -o gate-otlp.json
    """
    from evalops.export.otel import otlp_json

    doc = _document(ctx, gate, json_flag)
    _finish(ctx, "otel", doc, output, otlp_json(doc))


@export_app.command("summary")
def summary(
    ctx: typer.Context,
    gate: GateOption,
    output: OutputOption = "-",
    estimate: Annotated[
        str | None,
        typer.Option(help="Also an `estimation` block: this stored estimate's numbers (EST-n)."),
    ] = None,
    json_flag: JsonFlag = False,
) -> None:
    """The RFC 0244 EvalSummary: ids, enums, counts, scores and digests, no content.

    Example: evalops export summary --gate GATE-3 --estimate EST-2 -o summary.json
    """
    from evalops.export.summary import summary_json

    doc = _document(ctx, gate, json_flag)
    stored = None
    if estimate is not None:
        from evalops.services.estimation.records import stored_result

        with settings(ctx, json_flag).connect() as engine:
            stored = stored_result(engine, estimate)
    _finish(ctx, "summary", doc, output, summary_json(doc, stored))


@export_app.command("attestation")
def attestation(
    ctx: typer.Context,
    gate: GateOption,
    output: OutputOption = "-",
    sign_key: Annotated[
        Path | None,
        typer.Option(
            "--sign-key",
            "--sign-with",
            metavar="KEY",
            help="Ed25519 private key, OpenSSH (`ssh-keygen -t ed25519`, as for signed acts) "
            "or PEM: wrap the statement in a signed DSSE envelope.",
        ),
    ] = None,
    anchor: Annotated[
        list[str] | None,
        typer.Option(
            metavar="SEQ:HASH",
            help="A chain head kept outside the database (repeatable): refuse (exit 6) "
            "unless the chain still holds it.",
        ),
    ] = None,
    json_flag: JsonFlag = False,
) -> None:
    """An in-toto Statement v1 of the decision (subject: the execution digest), optionally
    signed in a DSSE envelope.

    The decision is checked first (it replays, its row matches its audit event, the chain
    links and holds every --anchor): a decision that does not verify is refused (exit 6)
    and nothing is written.

    Example: evalops export attestation --gate GATE-3 --sign-with release_ed25519 -o gate.json
    """
    from evalops.export.attestation import attestation_json
    from evalops.services.verify.anchors import parse_anchor
    from evalops.services.verify.attest import certified_document

    state = settings(ctx, json_flag)
    wanted = [parse_anchor(a) for a in anchor or []]
    with state.connect() as engine:
        doc = certified_document(engine, gate, wanted, now=now())
    _finish(ctx, "attestation", doc, output, attestation_json(doc, sign_key))


RequireOption = Annotated[
    Literal["pass"] | None,
    typer.Option(
        "--require",
        metavar="DECISION",
        help="Exit as the gate would unless the attested decision is this one (`pass`): "
        "3 for hold, 4 for block.",
    ),
]


def verify_attestation(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(metavar="FILE", help="A DSSE envelope (JSON).")],
    key: Annotated[
        Path,
        typer.Option(
            help="Ed25519 public key that must have signed it: OpenSSH (a `.pub` file) or PEM."
        ),
    ],
    require: RequireOption = None,
    build: Annotated[
        str | None,
        typer.Option(help="The build the attestation must be of (else exit 6)."),
    ] = None,
    suite: Annotated[
        str | None,
        typer.Option(help="The suite the attestation must be of (else exit 6)."),
    ] = None,
    json_flag: JsonFlag = False,
) -> None:
    """Check a signed attestation and print the decision it attests: the signature verifies
    with KEY, the payload is an evalops in-toto Statement v1, and the statement is
    consistent (its decision and subject are the decision document's, which hashes to its
    result_digest); exit 6 otherwise. With --require pass, a verified hold exits 3 and a
    verified block 4, as the gate did. --build and --suite tie it to the release being
    shipped: a PASS of another build or suite is exit 6.

    Example: evalops verify-attestation gate.intoto.json --key release.pub --require pass
    --build build-125 --suite regression/core
    """
    from evalops.export.attestation import load_public_key, read_bounded, verify_envelope

    settings(ctx, json_flag)
    raw = read_bounded(file, "FILE", "attestation file")
    try:
        import json

        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"not JSON: {exc}", str(file)) from None
    stmt = verify_envelope(value, load_public_key(key))
    predicate = stmt["predicate"]
    decision = str(predicate["decision"])
    data = {
        "verified": True,
        "subject": stmt["subject"],
        "predicateType": stmt["predicateType"],
        "gate_id": predicate.get("gate_id"),
        "decision": decision,
        "build": predicate.get("build"),
        "suite": predicate.get("suite"),
        "result_digest": predicate["digests"]["result_digest"],
        "audit_head": predicate.get("audit_head"),
        "required": require,
    }
    subject = stmt["subject"][0]
    line = (
        f"verified: {predicate.get('gate_id')} {decision.upper()} "
        f"for {subject.get('name')} (sha256:{subject['digest']['sha256']})"
    )
    from evalops.report.text import visible

    for option, wanted, attested in (
        ("--build", build, predicate.get("build")),
        ("--suite", suite, predicate.get("suite")),
    ):
        if wanted is not None and wanted != attested:
            raise VerificationError(
                f"the attestation is of {option.removeprefix('--')} {attested!r}, not "
                f"{wanted!r} ({option}): it says nothing about this release"
            )
    emit(ctx, data, echo_lines([visible(line)]))
    if require is not None and decision != require:
        raise typer.Exit(EXIT_BY_DECISION.get(decision, EXIT_VERIFY))


def register(app: typer.Typer) -> None:
    app.add_typer(export_app, name="export")
    app.command("verify-attestation")(verify_attestation)
