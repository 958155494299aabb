-- Each market's price at the end of each hour of the window: for every stream in %(streams)s
-- and every hour from %(first)s to %(last)s, the price its last move before the hour's end
-- left (NULL before the market opened). One probe of the event_spot_recent index per market
-- and hour (its WHERE is the index's predicate: the types are ledger.models.SPOT_EVENT_TYPES,
-- written out so that the planner matches it), so the cost is markets × hours however often
-- the prices moved. Reads only; locks nothing.
SELECT m.stream, h.hour, last_move.price
  FROM unnest(%(streams)s::text[]) AS m(stream)
 CROSS JOIN generate_series(%(first)s::timestamptz, %(last)s::timestamptz, interval '1 hour') AS h(hour)
  LEFT JOIN LATERAL (
       SELECT (e.payload ->> 'price_per_s_minor')::bigint AS price
         FROM ledger_event e
        WHERE e.type IN ('SpotPriceChanged', 'SpotBoundsChanged')
          AND e.stream = m.stream
          AND e.recorded_at < h.hour + interval '1 hour'
        ORDER BY e.recorded_at DESC
        LIMIT 1
       ) AS last_move ON true
