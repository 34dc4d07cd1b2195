"""Plain SQL naming the sync in force, shared by the ORM queries and the `sqlite3` readers
(which import no SQLAlchemy)."""

#: The id of the sync whose commit's definitions are in force: the latest sync that
#: recorded what is in force (a sync off the tracked branch or path registers definitions
#: and records none).
LATEST_IN_FORCE_RUN_SQL = (
    "(SELECT r.id FROM sync_run AS r WHERE EXISTS (SELECT 1 FROM sync_in_force AS x "
    "WHERE x.sync_run_id = r.id) ORDER BY r.id DESC LIMIT 1)"
)

#: The same, as of an audit seq `:cutoff`.
IN_FORCE_RUN_UPTO_SQL = (
    "SELECT r.id, r.git_commit FROM sync_run AS r WHERE r.audit_seq <= :cutoff AND EXISTS "
    "(SELECT 1 FROM sync_in_force AS x WHERE x.sync_run_id = r.id) ORDER BY r.id DESC LIMIT 1"
)
