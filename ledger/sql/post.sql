-- A balanced entry, whole: ledger_post (a migration creates it from this file; ledger.services
-- calls it through entry_post, the one way money moves).
--
-- Guarantees:
-- * The entry's event goes through the log's door (ledger_append), then the entry row and its
--   postings, then the projected balances: all of it or, when the caller rolls back, none.
-- * Balance moves run in the order given (the caller gives account-id order, the order every
--   writer locks rows in, so two entries never deadlock on each other's accounts). Each move
--   takes its row's lock and checks its floor in one UPDATE, so two concurrent debits can never
--   both pass a check made on a stale read. The first move that would cross a floor stops
--   the ones after it: `moved` counts those applied, and fewer than given means the caller
--   must roll back (nothing else undoes the moves before it).
-- * A version or key already taken fails the call inside ledger_append: nothing is written.
-- Returns one row: the event's id, version and fingerprint, the entry's id, and the moves
-- applied.

CREATE OR REPLACE FUNCTION ledger_post(
    p_stream text, p_type text, p_schema_version int, p_payload jsonb, p_actor text,
    p_expected int, p_key text, p_recorded_at timestamptz, p_kind text,
    p_accounts bigint[], p_amounts bigint[], p_currencies text[],
    p_move_accounts bigint[], p_move_deltas bigint[]
) RETURNS TABLE(event_id bigint, event_version int, event_fingerprint text, entry_id bigint,
                moved int) LANGUAGE plpgsql AS $$
DECLARE
    v_event bigint;
    v_entry bigint;
    v_moved int := 0;
BEGIN
    SELECT a.id, a.version, a.fingerprint INTO v_event, event_version, event_fingerprint
      FROM ledger_append(ARRAY[p_stream], ARRAY[p_type], ARRAY[p_schema_version],
                         ARRAY[p_payload], ARRAY[p_actor], ARRAY[p_expected], ARRAY[p_key],
                         p_recorded_at) AS a;
    INSERT INTO ledger_entry AS n (event_id, kind, created_at)
    VALUES (v_event, p_kind, p_recorded_at)
    RETURNING n.id INTO v_entry;
    INSERT INTO ledger_posting AS p (entry_id, account_id, amount, currency)
    SELECT v_entry, l.account, l.amount, l.currency
      FROM unnest(p_accounts, p_amounts, p_currencies) AS l(account, amount, currency);
    FOR i IN 1 .. coalesce(array_length(p_move_accounts, 1), 0) LOOP
        UPDATE ledger_account AS b SET balance = b.balance + p_move_deltas[i]
         WHERE b.id = p_move_accounts[i]
           AND (b.allow_negative OR b.balance + p_move_deltas[i] >= 0);
        EXIT WHEN NOT FOUND;
        v_moved := v_moved + 1;
    END LOOP;
    event_id := v_event;
    entry_id := v_entry;
    moved := v_moved;
    RETURN NEXT;
END
$$;
