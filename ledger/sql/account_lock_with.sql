-- An account with its row locked until the transaction ends (FOR UPDATE OF l), and in the same
-- statement another account, read and not locked (ledger.writes.account_lock_with). Each
-- account's columns in the order of ledger.writes.ACCOUNT_COLUMNS; no row when the locked one
-- does not exist, the other's columns NULL when it does not.
SELECT l.id, l.code, l.kind, l.owner_id, l.currency, l.balance, l.allow_negative, l.projected,
       o.id, o.code, o.kind, o.owner_id, o.currency, o.balance, o.allow_negative, o.projected
  FROM ledger_account l
  LEFT JOIN ledger_account o ON o.code = %(other)s
 WHERE l.code = %(code)s
   FOR UPDATE OF l
