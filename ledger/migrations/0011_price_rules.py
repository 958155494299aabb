"""A price book's base rates, tier multipliers and region multipliers, three tables of the same
shape (book, key, number), become one: PriceRule (book, kind, key, value).

The rows are copied over and the old tables dropped. The new table gets the guards the old ones
had (0005): no TRUNCATE, and no INSERT, UPDATE or DELETE of a row whose book is in force. The
copy runs before the guard is installed, since every copied row belongs to a book in force.
Reversible: going back recreates the three tables, copies the rows back and guards them again.
"""

import django.core.validators
import django.db.models.deletion
from django.db import migrations, models
from django.db.models.functions import Floor

OLD = {
    # table: (kind, key column, value column)
    "ledger_baserate": ("base_rate", "job_kind", "rate_per_s_minor"),
    "ledger_tiermultiplier": ("tier", "tier", "multiplier"),
    "ledger_regionmultiplier": ("region", "region", "multiplier"),
}


def _guard_sql(table: str) -> str:
    return f"""
CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
ALTER TABLE {table} ENABLE ALWAYS TRIGGER {table}_no_truncate;
CREATE TRIGGER {table}_frozen BEFORE INSERT OR UPDATE OR DELETE ON {table}
  FOR EACH ROW EXECUTE FUNCTION ledger_pricebook_row_frozen();
ALTER TABLE {table} ENABLE ALWAYS TRIGGER {table}_frozen;"""


def _execute(schema_editor, sql: str) -> None:  # noqa: ANN001
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(sql)


def copy_rules(apps, schema_editor):  # noqa: ANN001
    with schema_editor.connection.cursor() as cursor:
        for table, (kind, key, value) in OLD.items():
            cursor.execute(
                f"INSERT INTO ledger_pricerule (book_id, kind, key, value) "  # noqa: S608
                f"SELECT book_id, %s, {key}, {value} FROM {table} ORDER BY id",
                [kind],
            )


def copy_rules_back(apps, schema_editor):  # noqa: ANN001
    with schema_editor.connection.cursor() as cursor:
        for table, (kind, key, value) in OLD.items():
            cursor.execute(
                f"INSERT INTO {table} (book_id, {key}, {value}) "  # noqa: S608
                "SELECT book_id, key, value FROM ledger_pricerule WHERE kind = %s ORDER BY id",
                [kind],
            )


def guard_new(apps, schema_editor):  # noqa: ANN001
    _execute(schema_editor, _guard_sql("ledger_pricerule"))


def unguard_new(apps, schema_editor):  # noqa: ANN001
    _execute(
        schema_editor,
        "DROP TRIGGER IF EXISTS ledger_pricerule_no_truncate ON ledger_pricerule;"
        "DROP TRIGGER IF EXISTS ledger_pricerule_frozen ON ledger_pricerule;",
    )


def guard_old(apps, schema_editor):  # noqa: ANN001
    _execute(schema_editor, "".join(_guard_sql(table) for table in OLD))


class Migration(migrations.Migration):
    dependencies = [("ledger", "0010_sealbatch_postgres_horizon_only")]

    operations = [
        migrations.CreateModel(
            name="PriceRule",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "kind",
                    models.CharField(
                        choices=[
                            ("base_rate", "base rate of a job kind (credits-minor per second)"),
                            ("tier", "GPU-tier multiplier"),
                            ("region", "region multiplier"),
                        ],
                        max_length=16,
                    ),
                ),
                (
                    "key",
                    models.CharField(
                        max_length=32,
                        validators=[
                            django.core.validators.RegexValidator(
                                "^[a-z0-9][a-z0-9-]{0,31}$", "lowercase letters, digits and '-'"
                            )
                        ],
                    ),
                ),
                (
                    "value",
                    models.DecimalField(
                        decimal_places=3,
                        help_text="A base rate in whole credits-minor per second, or a "
                        "multiplier (0.001-100).",
                        max_digits=13,
                    ),
                ),
                (
                    "book",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="rules",
                        to="ledger.pricebook",
                    ),
                ),
            ],
            options={
                "ordering": ["kind", "key"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("book", "kind", "key"), name="pricerule_book_kind_key"
                    ),
                    models.CheckConstraint(
                        condition=models.Q(kind__in=["base_rate", "tier", "region"]),
                        name="pricerule_kind_known",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(value__gt=0), name="pricerule_positive"
                    ),
                    models.CheckConstraint(
                        condition=~models.Q(kind="base_rate")
                        | models.Q(value__gte=1, value=Floor("value")),
                        name="pricerule_base_rate_whole",
                        violation_error_message="A base rate is a whole number of at least 1.",
                    ),
                ],
            },
        ),
        # Backwards, this runs after the rows are copied back into the recreated tables.
        migrations.RunPython(migrations.RunPython.noop, guard_old),
        migrations.RunPython(copy_rules, copy_rules_back),
        migrations.RunPython(guard_new, unguard_new),
        migrations.DeleteModel(name="BaseRate"),
        migrations.DeleteModel(name="RegionMultiplier"),
        migrations.DeleteModel(name="TierMultiplier"),
    ]
