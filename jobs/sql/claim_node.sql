-- The claiming node as the claim's parameters describe it (jobs.node_profile), checked by the
-- claim's own statement (included first by claim_queue.sql and claim_bucketed.sql): its row at
-- the stream version the parameters were read at (a drain, a new floor, new hardware each bump
-- it), in a state that takes work, out of any cool-down, on the side of the trust line the
-- parameters say, and the market's price for its region and tier still the one its price was
-- computed from (0: the market had not priced them). One row when all of that holds; none when
-- the node moved since: the claim then takes nothing and says so (no row at all), and its
-- caller reads the node again. A waiting claim's view of its node is therefore never older
-- than the statement that leases: the lease carries the price in force when it was taken.
-- Locks nothing: a change that commits while the statement runs is ordered after the claim.
node AS MATERIALIZED (
    SELECT n.id FROM nodes_node n
     WHERE n.id = %(node)s AND n.event_version = %(node_version)s
       AND n.state = ANY(%(claimable)s::varchar[])
       AND (n.cooldown_until IS NULL OR n.cooldown_until <= %(now)s)
       AND (n.reliability >= %(trusted_min)s AND n.verified_results >= %(verified_min)s)
           = %(trusted)s
       AND COALESCE((SELECT s.price_per_s_minor FROM ledger_spotprice s
                      WHERE s.region = %(spot_region)s AND s.tier = %(spot_tier)s), 0)
           = %(spot_seen)s
),
