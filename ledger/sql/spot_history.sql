-- The markets' price history since %(since)s, for the network page: one row per market and
-- hour in which its price moved, with its price at the end of that hour and its price before
-- the hour's first move (a SpotPriceChanged's old price; a bounds change records none, so its
-- own). The WHERE clause is the event_spot_recent index's predicate (the types are
-- ledger.models.SPOT_EVENT_TYPES, written out so that the planner matches it) and key, so only
-- the window's market events are read, and at most one row per market and hour comes back
-- however often the price moved in it. Reads only; locks nothing.
SELECT payload ->> 'region' AS region,
       payload ->> 'tier' AS tier,
       date_trunc('hour', recorded_at) AS hour,
       (array_agg((payload ->> 'price_per_s_minor')::bigint ORDER BY id DESC))[1] AS closing,
       (array_agg(COALESCE(payload ->> 'old_price_per_s_minor', payload ->> 'price_per_s_minor')::bigint ORDER BY id))[1] AS opening
  FROM ledger_event
 WHERE type IN ('SpotPriceChanged', 'SpotBoundsChanged')
   AND recorded_at >= %(since)s
 GROUP BY 1, 2, 3
 ORDER BY 1, 2, 3
