-- The oldest transaction still open in THIS database, as a 64-bit txid (ledger.chain: sealing
-- stops below it, where an event may still be committed). pg_stat_activity shows 32-bit xids:
-- each is widened against our own (newer) txid; one newer than ours (it started after we did)
-- widens to a huge distance and is left out: it cannot have written an event below ours.
-- Transactions in other databases on the same server are ignored: they cannot write our
-- events, and a long one elsewhere must not stall sealing here (pg_snapshot_xmin is
-- server-wide). Takes no lock.
WITH me AS (SELECT pg_current_xact_id()::text::bigint AS xid),
open AS (
  SELECT ((me.xid - a.backend_xid::text::bigint) % 4294967296 + 4294967296) % 4294967296
         AS distance
    FROM pg_stat_activity a, me
   WHERE a.datname = current_database() AND a.backend_xid IS NOT NULL
     AND a.pid <> pg_backend_pid()
)
SELECT me.xid - COALESCE(max(open.distance) FILTER (WHERE open.distance < 2147483648), 0)
  FROM me LEFT JOIN open ON true GROUP BY me.xid
