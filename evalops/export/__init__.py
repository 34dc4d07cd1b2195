"""Exports of a report document: JUnit XML, OTLP JSON logs, EvalSummary, in-toto attestation.

Each exporter is a pure function over the report document built by
`evalops.services.reports.audit`, so it can be tested without a database.
"""
