"""PostgreSQL guards for the economy's tables.

- Every economy table refuses TRUNCATE (a statement trigger named `<table>_no_truncate`, as the
  ledger's own tables have).
- Export lines are append-only; an export refuses DELETE, and UPDATE once it is sealed (sha256).
- A price book in force is frozen: its row and its rate rows refuse change. A book is published
  by moving a draft's effective_from back to now, which the trigger allows (the old value is
  in the future).

ENABLE ALWAYS, so `session_replication_role = replica` does not silence them.
"""

from django.db import migrations

TABLES = [
    "ledger_pricebook", "ledger_baserate", "ledger_tiermultiplier", "ledger_regionmultiplier",
    "ledger_spotprice", "ledger_cashout", "ledger_cashoutexport", "ledger_cashoutexportline",
]
BOOK_ROWS = ["ledger_baserate", "ledger_tiermultiplier", "ledger_regionmultiplier"]

FUNCTIONS = """
CREATE OR REPLACE FUNCTION ledger_pricebook_frozen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.effective_from <= now() THEN
    RAISE EXCEPTION 'price book % is in force and frozen: publish a new version', OLD.id
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
  RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION ledger_pricebook_row_frozen() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  book_ids bigint[];
BEGIN
  IF TG_OP = 'INSERT' THEN book_ids := ARRAY[NEW.book_id];
  ELSIF TG_OP = 'DELETE' THEN book_ids := ARRAY[OLD.book_id];
  ELSE book_ids := ARRAY[OLD.book_id, NEW.book_id];
  END IF;
  IF EXISTS (SELECT 1 FROM ledger_pricebook
             WHERE id = ANY(book_ids) AND effective_from <= now()) THEN
    RAISE EXCEPTION '% on % refused: its price book is in force and frozen', TG_OP, TG_TABLE_NAME
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
  RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION ledger_export_sealed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' OR OLD.sha256 <> '' THEN
    RAISE EXCEPTION '% on export % refused: exports are sealed', TG_OP, OLD.id
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NEW;
END $$;
"""


def _forward_sql() -> str:
    parts = [FUNCTIONS]
    for table in TABLES:
        parts.append(f"""
CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
ALTER TABLE {table} ENABLE ALWAYS TRIGGER {table}_no_truncate;""")
    parts.append("""
CREATE TRIGGER ledger_pricebook_frozen BEFORE UPDATE OR DELETE ON ledger_pricebook
  FOR EACH ROW EXECUTE FUNCTION ledger_pricebook_frozen();
ALTER TABLE ledger_pricebook ENABLE ALWAYS TRIGGER ledger_pricebook_frozen;
CREATE TRIGGER ledger_cashoutexportline_append_only BEFORE UPDATE OR DELETE
  ON ledger_cashoutexportline FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
ALTER TABLE ledger_cashoutexportline ENABLE ALWAYS TRIGGER ledger_cashoutexportline_append_only;
CREATE TRIGGER ledger_cashoutexport_sealed BEFORE UPDATE OR DELETE ON ledger_cashoutexport
  FOR EACH ROW EXECUTE FUNCTION ledger_export_sealed();
ALTER TABLE ledger_cashoutexport ENABLE ALWAYS TRIGGER ledger_cashoutexport_sealed;""")
    for table in BOOK_ROWS:
        parts.append(f"""
CREATE TRIGGER {table}_frozen BEFORE INSERT OR UPDATE OR DELETE ON {table}
  FOR EACH ROW EXECUTE FUNCTION ledger_pricebook_row_frozen();
ALTER TABLE {table} ENABLE ALWAYS TRIGGER {table}_frozen;""")
    return "\n".join(parts)


def _backward_sql() -> str:
    parts = [f"DROP TRIGGER IF EXISTS {t}_no_truncate ON {t};" for t in TABLES]
    parts += [f"DROP TRIGGER IF EXISTS {t}_frozen ON {t};" for t in BOOK_ROWS]
    parts += [
        "DROP TRIGGER IF EXISTS ledger_pricebook_frozen ON ledger_pricebook;",
        "DROP TRIGGER IF EXISTS ledger_cashoutexportline_append_only ON ledger_cashoutexportline;",
        "DROP TRIGGER IF EXISTS ledger_cashoutexport_sealed ON ledger_cashoutexport;",
        "DROP FUNCTION IF EXISTS ledger_pricebook_frozen, ledger_pricebook_row_frozen, "
        "ledger_export_sealed;",
    ]
    return "\n".join(parts)


def forward(apps, schema_editor):  # noqa: ANN001
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(_forward_sql())


def backward(apps, schema_editor):  # noqa: ANN001
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(_backward_sql())


class Migration(migrations.Migration):
    dependencies = [("ledger", "0004_seed_price_books")]
    operations = [migrations.RunPython(forward, backward)]
