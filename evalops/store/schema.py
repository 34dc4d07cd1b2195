"""The migration revision this build of evalops needs (a test pins it to Alembic's head).

Kept as a constant so that every command can check the database without importing Alembic.
"""

HEAD_REVISION = "0005"


def is_newer(revision: str | None) -> bool:
    """A revision this evalops cannot know: a later number than its head (revisions are
    numbered in order, `0001` on), or any revision that is not one of its migrations'."""
    if revision is None or revision == HEAD_REVISION:
        return False
    if revision.isdigit() and HEAD_REVISION.isdigit():
        return int(revision) > int(HEAD_REVISION)
    return revision not in known_revisions()


def known_revisions() -> frozenset[str]:
    """The revisions of the migrations shipped with this evalops (`NNNN_name.py`), read
    from the file names without loading Alembic."""
    from evalops.resources import migrations_dir

    versions = migrations_dir() / "versions"
    return frozenset(p.name.split("_", 1)[0] for p in versions.glob("*_*.py"))
