-- A balanced entry, whole: ledger_post (a migration creates it from this file; ledger.services
-- calls it through entry_post, the one way money moves).
--
-- Guarantees:
-- * The entry's event goes through the log's door (ledger_append) first; then the entry row and
--   its postings; then the projected balances: all of it or, when the caller rolls back, none.
-- * The balances' rows are moved, and so locked, one by one in account-id order, the order
--   every writer locks them in, so two entries never deadlock on each other's accounts. Each
--   move checks its floor on the row as locked (a concurrent debit that committed first is
--   seen: PostgreSQL checks the condition again on the row it waited for), so two concurrent
--   debits can never both pass a check made on a stale read.
-- * A move that would cross a floor is not applied, and none after it: `refused` names that
--   account, and the caller must then roll back (the moves before it were applied).
-- * A version or key already taken fails the call inside ledger_append: nothing is written.
-- Returns one row: the event's id, version and fingerprint, the entry's id, and the refused
-- account (NULL when every move applied).

CREATE OR REPLACE FUNCTION ledger_post(
    p_stream text, p_type text, p_schema_version int, p_payload jsonb, p_actor text,
    p_expected int, p_key text, p_recorded_at timestamptz, p_kind text,
    p_accounts bigint[], p_amounts bigint[], p_currencies text[],
    p_move_accounts bigint[], p_move_deltas bigint[]
) RETURNS TABLE(event_id bigint, event_version int, event_fingerprint text, entry_id bigint,
                refused bigint) LANGUAGE plpgsql
-- One plan per statement for every call, as for ledger_append (left to choose, PostgreSQL
-- planned the postings' insert anew on every call, as the arrays make each custom plan look
-- cheaper), and never a whole-table scan: every account it moves is found by id, and a plan kept
-- from when the accounts were few would otherwise read them all on every call.
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off AS $$
DECLARE
    v_entry bigint;
    v_account bigint;
    v_delta bigint;
BEGIN
    SELECT a.id, a.version, a.fingerprint INTO event_id, event_version, event_fingerprint
      FROM ledger_append(ARRAY[p_stream], ARRAY[p_type], ARRAY[p_schema_version],
                         ARRAY[p_payload], ARRAY[p_actor], ARRAY[p_expected], ARRAY[p_key],
                         p_recorded_at) AS a;
    INSERT INTO ledger_entry AS n (event_id, kind, created_at)
    VALUES (event_id, p_kind, p_recorded_at)
    RETURNING n.id INTO v_entry;
    INSERT INTO ledger_posting (entry_id, account_id, amount, currency)
    SELECT v_entry, l.account, l.amount, l.currency
      FROM unnest(p_accounts, p_amounts, p_currencies) AS l(account, amount, currency);
    entry_id := v_entry;
    FOR v_account, v_delta IN
        SELECT m.id, m.delta FROM unnest(p_move_accounts, p_move_deltas) AS m(id, delta)
         ORDER BY m.id
    LOOP
        UPDATE ledger_account AS b SET balance = b.balance + v_delta
         WHERE b.id = v_account AND (b.allow_negative OR b.balance + v_delta >= 0);
        IF NOT FOUND THEN
            refused := v_account;
            EXIT;
        END IF;
    END LOOP;
    RETURN NEXT;
END
$$;
