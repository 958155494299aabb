-- A settlement's first statement (ledger.settlement.hold_lock): the job's hold, locked until
-- the transaction ends (FOR UPDATE OF h: the one lock every settlement and release of the job
-- queues on), read with the accounts a charge credits (the operator's earnings, the platform's
-- revenue), the one a release credits (the submitter's available credits; none of the three
-- locked: their codes, kinds and flags never change, and their balances move by relative
-- UPDATEs) and the price book in force at %(at)s (book_in_force.sql). Each account's
-- columns in the order of ledger.writes.ACCOUNT_COLUMNS, NULL where there is none; no row when
-- nothing was ever held for the job.
SELECT h.id, h.code, h.kind, h.owner_id, h.currency, h.balance, h.allow_negative, h.projected,
       e.id, e.code, e.kind, e.owner_id, e.currency, e.balance, e.allow_negative, e.projected,
       r.id, r.code, r.kind, r.owner_id, r.currency, r.balance, r.allow_negative, r.projected,
       v.id, v.code, v.kind, v.owner_id, v.currency, v.balance, v.allow_negative, v.projected,
       b.id, b.platform_fee_bps
  FROM ledger_account h
  LEFT JOIN ledger_account e ON e.code = %(earnings)s
  LEFT JOIN ledger_account r ON r.code = %(revenue)s
  LEFT JOIN ledger_account v ON v.code = %(available)s
  LEFT JOIN LATERAL (
\i book_in_force
  ) b ON true
 WHERE h.code = %(held)s
   FOR UPDATE OF h
