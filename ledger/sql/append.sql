-- The event log's one door: every event is written by ledger_append (a migration creates it
-- from this file; ledger.services calls it through event_append / events_append_bulk).
--
-- Guarantees:
-- * Versions are the ledger's: an event takes expected + 1, where expected is the version its
--   stream has before it as the caller saw it (its optimistic-concurrency check: a caller
--   giving two events of one stream gives the second the first's version). An event with no
--   expected version (NULL) goes at the stream's end: COALESCE(MAX(version), 0) + nth, nth
--   numbering the call's such events of that stream in the order given.
-- * Two writers at one version: the unique index event_stream_version refuses the second, and
--   a reused idempotency key is refused by event_idempotency_key; the caller maps either to
--   VersionConflict / IdempotencyConflict by the constraint's name. Nothing is written then.
-- * An event written under an idempotency key gets its fingerprint, by the one rule
--   ledger_fingerprint, which the replay check also asks: a request that comes again under the
--   key is told from another request by it. An event without a key can never be replayed, so
--   it has none (NULL): hashing its text would be work that nothing reads, on every event.
-- * Locks: only the rows it inserts (and the unique indexes' entries). The txid trigger stamps
--   each row as for any INSERT.
-- PL/pgSQL, so its plans are prepared once per session.

-- The fingerprint hashes the text of the JSON array [stream, type, payload] as PostgreSQL writes
-- jsonb (jsonb_build_array(p_stream, p_type, p_payload)::text). It is spelled out piece by piece
-- because building that array copies the whole payload into a new jsonb before writing it out,
-- which cost more than the rest of an append of many events; the text is the same, byte for
-- byte (the strings escaped by the same rule, ", " between elements). STABLE, as what it calls
-- is (to_json): PostgreSQL writes the body into the calling statement only when the function
-- claims no more than its body, and a call it cannot inline cost twice the body's own work.
CREATE OR REPLACE FUNCTION ledger_fingerprint(p_stream text, p_type text, p_payload jsonb)
RETURNS text LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT encode(sha256(convert_to('[' || to_json(p_stream)::text || ', '
                                        || to_json(p_type)::text || ', '
                                        || p_payload::text || ']', 'UTF8')), 'hex')
$$;

CREATE OR REPLACE FUNCTION ledger_append(
    p_streams text[], p_types text[], p_schema_versions int[], p_payloads jsonb[],
    p_actors text[], p_expected int[], p_keys text[], p_recorded_at timestamptz
) RETURNS TABLE(id bigint, version int, fingerprint text) LANGUAGE plpgsql
-- One plan for every call: with its own custom plan per call (the default, as the arrays'
-- lengths make every custom plan look far cheaper than the generic one) PostgreSQL planned
-- the INSERT anew each time, which cost several times the insert itself.
-- That plan is made once per session, with the table sizes of that moment, and kept until the
-- table's statistics change. Every row this reads (a stream's last version) is found by key, so
-- it is told never to scan a whole table: a plan made while the log was nearly empty would
-- otherwise read all of it on every call once it had grown.
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off AS $$
#variable_conflict use_column
BEGIN
    IF cardinality(p_streams) = 1 THEN
        -- One event, as most calls are (a claim, a completion, an entry): the same row as the
        -- batch below would write, without the batch's unnesting, numbering and sorting, whose
        -- set-up cost more than the insert itself.
        RETURN QUERY
        INSERT INTO ledger_event AS e (stream, version, type, schema_version, payload, actor,
                                       idempotency_key, fingerprint, recorded_at)
        VALUES (p_streams[1],
                COALESCE(p_expected[1], (SELECT COALESCE(MAX(x.version), 0) FROM ledger_event x
                                          WHERE x.stream = p_streams[1])) + 1,
                p_types[1], p_schema_versions[1], p_payloads[1], p_actors[1], p_keys[1],
                CASE WHEN p_keys[1] IS NOT NULL
                     THEN ledger_fingerprint(p_streams[1], p_types[1], p_payloads[1]) END,
                p_recorded_at)
        RETURNING e.id, e.version::int, e.fingerprint::text;
        RETURN;
    END IF;
    IF array_position(p_expected, NULL) IS NOT NULL THEN
        -- The events that go at their stream's end are given the version before them: the
        -- stream's end plus the call's such events of that stream before them, numbered within
        -- a partition in byte order (COLLATE "C": any order groups them, and that one is the
        -- cheapest to sort). A call whose events all name their version, as a set-based
        -- writer's do (the reaper's batch), skips this window over the batch, which cost about
        -- a tenth of a large batch's insert.
        SELECT array_agg(n.before ORDER BY n.ord) INTO p_expected
          FROM (SELECT r.ord,
                       COALESCE(r.expected,
                                (SELECT COALESCE(MAX(x.version), 0) FROM ledger_event x
                                  WHERE x.stream = r.stream)
                                  + row_number() OVER (PARTITION BY r.stream COLLATE "C",
                                                                    r.expected IS NULL
                                                           ORDER BY r.ord) - 1) AS before
                  FROM unnest(p_streams, p_expected) WITH ORDINALITY AS r(stream, expected, ord)
               ) AS n;
    END IF;
    -- Rows go in, and come back, in the order given (ORDER BY r.ord).
    RETURN QUERY
    INSERT INTO ledger_event AS e (stream, version, type, schema_version, payload, actor,
                                   idempotency_key, fingerprint, recorded_at)
    SELECT r.stream, r.expected + 1, r.type, r.schema_version, r.payload, r.actor, r.key,
           CASE WHEN r.key IS NOT NULL THEN ledger_fingerprint(r.stream, r.type, r.payload) END,
           p_recorded_at
      FROM unnest(p_streams, p_types, p_schema_versions, p_payloads, p_actors, p_expected,
                  p_keys) WITH ORDINALITY
           AS r(stream, type, schema_version, payload, actor, expected, key, ord)
     ORDER BY r.ord
    RETURNING e.id, e.version::int, e.fingerprint::text;
END
$$;
