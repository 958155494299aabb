-- Every event of the log once, in id order, as LoggedEvent's columns, then its seal's seq and
-- hash: verify_ledger's one pass (ledger.projections.logged_events). The seal's two are NULL for
-- an event not sealed yet, and for every event when %(with_seals)s is false (the join then
-- reads no seal). Reads only, from the caller's snapshot; takes no lock. Read through a
-- server-side cursor, a chunk at a time.
SELECT e.id, e.stream, e.version, e.type, e.schema_version, e.payload, e.actor,
       e.idempotency_key, e.recorded_at, e.txid, s.seq, s.hash
  FROM ledger_event e
  LEFT JOIN ledger_eventseal s ON %(with_seals)s AND s.event_id = e.id
 ORDER BY e.id
