-- A balanced entry, whole: ledger_post (a migration creates it from this file; ledger.services
-- calls it through entry_post, the one way money moves).
--
-- Guarantees:
-- * The entry's event goes through the log's door (ledger_append) first; then the entry row and
--   its postings; then the projected balances: all of it or, when the caller rolls back, none.
-- * The balances' rows are locked in account-id order (`lk`, FOR UPDATE after ORDER BY), the
--   order every writer locks them in, so two entries never deadlock on each other's accounts.
--   Each move checks its floor on the row as locked (a concurrent debit that committed first is
--   seen), so two concurrent debits can never both pass a check made on a stale read.
-- * A move that would cross a floor is not applied; `refused` names the first such account
--   (lowest id), and the caller must then roll back (the other moves were applied).
-- * A version or key already taken fails the call inside ledger_append: nothing is written.
-- One statement, so PL/pgSQL keeps one plan for it. Returns one row: the event's id, version
-- and fingerprint, the entry's id, and the refused account (NULL when every move applied).

CREATE OR REPLACE FUNCTION ledger_post(
    p_stream text, p_type text, p_schema_version int, p_payload jsonb, p_actor text,
    p_expected int, p_key text, p_recorded_at timestamptz, p_kind text,
    p_accounts bigint[], p_amounts bigint[], p_currencies text[],
    p_move_accounts bigint[], p_move_deltas bigint[]
) RETURNS TABLE(event_id bigint, event_version int, event_fingerprint text, entry_id bigint,
                refused bigint) LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
    WITH ev AS MATERIALIZED (
        SELECT a.id, a.version, a.fingerprint
          FROM ledger_append(ARRAY[p_stream], ARRAY[p_type], ARRAY[p_schema_version],
                             ARRAY[p_payload], ARRAY[p_actor], ARRAY[p_expected],
                             ARRAY[p_key], p_recorded_at) AS a
    ), en AS (
        INSERT INTO ledger_entry AS n (event_id, kind, created_at)
        SELECT ev.id, p_kind, p_recorded_at FROM ev
        RETURNING n.id
    ), po AS (
        INSERT INTO ledger_posting AS p (entry_id, account_id, amount, currency)
        SELECT en.id, l.account, l.amount, l.currency
          FROM en, unnest(p_accounts, p_amounts, p_currencies) AS l(account, amount, currency)
    ), lk AS MATERIALIZED (
        SELECT b.id FROM ledger_account AS b
         WHERE b.id = ANY(p_move_accounts) AND EXISTS (SELECT 1 FROM en)
         ORDER BY b.id
           FOR UPDATE
    ), mv AS (
        UPDATE ledger_account AS b SET balance = b.balance + m.delta
          FROM unnest(p_move_accounts, p_move_deltas) AS m(id, delta)
         WHERE b.id = m.id AND b.id IN (SELECT lk.id FROM lk)
           AND (b.allow_negative OR b.balance + m.delta >= 0)
        RETURNING b.id
    )
    SELECT ev.id, ev.version, ev.fingerprint, en.id,
           (SELECT min(m.id) FROM unnest(p_move_accounts) AS m(id)
             WHERE m.id NOT IN (SELECT mv.id FROM mv))
      FROM ev, en;
END
$$;
