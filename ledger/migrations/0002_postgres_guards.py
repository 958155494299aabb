"""PostgreSQL guards: append-only tables, balanced entries, and the writer's txid on events.

The triggers are ENABLE ALWAYS so that `SET session_replication_role = replica` (which silences
ordinary triggers) does not silence them. Row triggers do not fire on TRUNCATE, so each table has a
statement trigger for it too. The models' own refusals are a first guard in front of them.
"""

from django.db import migrations

APPEND_ONLY = ["ledger_event", "ledger_entry", "ledger_posting", "ledger_eventseal",
               "ledger_sealbatch"]

FUNCTIONS = """
CREATE OR REPLACE FUNCTION ledger_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% on % is refused: the ledger is append-only', TG_OP, TG_TABLE_NAME
    USING ERRCODE = 'insufficient_privilege';
END $$;

CREATE OR REPLACE FUNCTION ledger_event_stamp_txid() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.txid := pg_current_xact_id()::text::bigint;
  RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION ledger_entry_must_balance() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  bad record;
BEGIN
  SELECT currency, SUM(amount) AS total INTO bad FROM ledger_posting
   WHERE entry_id = NEW.entry_id GROUP BY currency HAVING SUM(amount) <> 0 LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'entry % postings sum to % %, not zero', NEW.entry_id, bad.total, bad.currency
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NULL;
END $$;
"""


def _forward_sql() -> str:
    parts = [FUNCTIONS]
    for table in APPEND_ONLY:
        parts.append(f"""
CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table}
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
ALTER TABLE {table} ENABLE ALWAYS TRIGGER {table}_append_only;
ALTER TABLE {table} ENABLE ALWAYS TRIGGER {table}_no_truncate;
""")
    parts.append("""
CREATE TRIGGER ledger_event_txid BEFORE INSERT ON ledger_event
  FOR EACH ROW EXECUTE FUNCTION ledger_event_stamp_txid();
ALTER TABLE ledger_event ENABLE ALWAYS TRIGGER ledger_event_txid;
CREATE CONSTRAINT TRIGGER ledger_posting_balanced AFTER INSERT ON ledger_posting
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ledger_entry_must_balance();
ALTER TABLE ledger_posting ENABLE ALWAYS TRIGGER ledger_posting_balanced;
""")
    return "\n".join(parts)


def _backward_sql() -> str:
    parts = []
    for table in APPEND_ONLY:
        parts.append(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table};")
        parts.append(f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table};")
    parts.append("DROP TRIGGER IF EXISTS ledger_event_txid ON ledger_event;")
    parts.append("DROP TRIGGER IF EXISTS ledger_posting_balanced ON ledger_posting;")
    parts.append("DROP FUNCTION IF EXISTS ledger_refuse_change, ledger_event_stamp_txid, "
                 "ledger_entry_must_balance;")
    return "\n".join(parts)


def forward(apps, schema_editor):  # noqa: ANN001
    # No parameters: the SQL's '%' are RAISE placeholders, not driver placeholders.
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(_forward_sql())


def backward(apps, schema_editor):  # noqa: ANN001
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(_backward_sql())


class Migration(migrations.Migration):
    dependencies = [("ledger", "0001_initial")]
    operations = [migrations.RunPython(forward, backward)]
