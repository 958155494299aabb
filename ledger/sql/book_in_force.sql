-- The price book in force at %(at)s: the latest effective at or before it. Its id (the book's
-- version) and its platform fee. Read alone by ledger.pricing.fee_at and, included, by a
-- settlement's first statement (hold_lock.sql). Takes no lock: a book in force never changes.
SELECT p.id, p.platform_fee_bps
  FROM ledger_pricebook p
 WHERE p.effective_from <= %(at)s
 ORDER BY p.effective_from DESC
 LIMIT 1
