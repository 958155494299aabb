"""The deferred check that an entry's postings balance (`ledger_entry_must_balance`, migration
0002) finds them by key, never by reading the whole table.

The trigger runs once for each posting at commit, and its plan is made once per session, with
the table's size of that moment, and kept until the table's statistics change. A session that
made it while ledger_posting was nearly empty (a new hub, a pooled connection opened early) read
every posting on every later check, until the next ANALYZE: about 130 µs a posting with a few
thousand of them, growing with the table. The ledger's own functions are told the same
(ledger/sql/append.sql, post.sql)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("ledger", "0022_fingerprint_only_with_a_key")]

    operations = [
        migrations.RunSQL(
            "ALTER FUNCTION ledger_entry_must_balance() SET enable_seqscan = off",
            "ALTER FUNCTION ledger_entry_must_balance() RESET enable_seqscan",
        )
    ]
