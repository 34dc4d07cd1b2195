"""The root command's sub-commands, named without importing them (a start-up optimization).

Building the click command of every sub-command (typer converts each parameter of each
sub-app) cost more than the rest of `evalops --help`. The root group (evalops/cli/main.py
`EvalopsGroup`) lists its commands from this table and imports and builds one only when its
name is invoked. `tests/cli/test_command_table.py` fails when the table and the commands
differ: a command missing or extra, another module, another one-line help.
"""

from __future__ import annotations

from typing import NamedTuple


class Entry(NamedTuple):
    """One sub-command of `evalops`."""

    name: str
    #: The module of `evalops.cli` whose `register` adds it to the root.
    module: str
    #: Its help up to the first sentence's end (click's short help at an unlimited width);
    #: click shortens it to the terminal's width exactly as it would the whole help.
    summary: str


#: In the order typer lists them (the commands, then the groups, each in the order of
#: registration): the order of `evalops --help`'s "Other commands".
COMMANDS: tuple[Entry, ...] = (
    Entry("init", "db", "Create the registry database (if needed) and migrate it to head."),
    Entry(
        "validate",
        "registry_cmds",
        "Validate every spec file of a registry, and their references; no database needed.",
    ),
    Entry(
        "digest",
        "registry_cmds",
        "Print each spec's digests (recipes in docs/digests.md); no database needed.",
    ),
    Entry(
        "sync",
        "registry_cmds",
        "Register every definition with its digests, file path and git commit.",
    ),
    Entry(
        "promote",
        "suite",
        "Promote a task (or an incident's task) into a suite under the SuitePolicy.",
    ),
    Entry(
        "retire",
        "suite",
        "Remove a task from a suite (history kept); refused (exit 5) without approval, or when "
        "the replacement does not cover everything the task covered.",
    ),
    Entry(
        "compare",
        "gate",
        "The paired regression verdict of two builds on a suite (nothing stored).",
    ),
    Entry(
        "verify-attestation",
        "export",
        "Check a signed attestation and print the decision it attests: the signature verifies "
        "with KEY, the payload is an evalops in-toto Statement v1, and the statement is "
        "consistent (its decision and subject are the decision document's, which hashes to "
        "its result_digest); exit 6 otherwise.",
    ),
    Entry(
        "verify",
        "verify",
        "Re-hash the audit chain, every row it recorded (both directions), every definition "
        "and trial, and replay every gate decision; exit 6 naming the first bad item.",
    ),
    Entry(
        "demo",
        "verify",
        "Run the lifecycle on a copy of the example registry, printing each command and exit code.",
    ),
    Entry("db", "db", "Migrate the registry database."),
    Entry(
        "schema",
        "registry_cmds",
        "JSON Schemas of the spec formats and the machine-readable outputs.",
    ),
    Entry(
        "registry",
        "registry_cmds",
        'The registry\'s tracked branch and path (docs/authority.md, "The tracked branch").',
    ),
    Entry(
        "new",
        "new",
        "Write a commented starter file that `evalops validate` accepts as written.",
    ),
    Entry("task", "task", "Registered tasks."),
    Entry("incident", "incident", "Real failures, from report to regression task."),
    Entry("suite", "suite", "Suites and their members."),
    Entry("trials", "trials", "Trial records: ingest, inspect, reconcile."),
    Entry(
        "void",
        "trials",
        "Voids of trials ingested by mistake (`evalops trials void` records them).",
    ),
    Entry("trajectory", "trajectory", "Grade tool-call trajectories (RFC 0244)."),
    Entry("calibration", "calibration", "Model-grader calibration against human labels."),
    Entry("review", "review", "The human review queue."),
    Entry("gate", "gate", "The release gate: pass, hold or block, and why."),
    Entry(
        "estimate",
        "estimate",
        "Rates of the population an estimation suite samples, with honest intervals.",
    ),
    Entry("waiver", "waiver", "Build-scoped, expiring waivers of non-critical failures."),
    Entry(
        "report",
        "report",
        "Audit reports of stored gate decisions, suite cards (HTML, Markdown, JSON), and the "
        "static site of the registry.",
    ),
    Entry(
        "export",
        "export",
        "Exports of a stored gate decision: JUnit XML, OTLP JSON logs, RFC 0244 EvalSummary, "
        "in-toto attestation.",
    ),
)

BY_NAME: dict[str, Entry] = {entry.name: entry for entry in COMMANDS}
