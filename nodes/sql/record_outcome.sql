-- One attempt's outcome recorded on its node (nodes.services.node_record_outcome): the nodes
-- app's function node_outcome_record (migration nodes 0009 says what it guarantees and locks:
-- the node's row, until the transaction ends). A success's statement of the jobs app calls the
-- function itself (jobs/sql/succeed.sql). No row: no such node.
SELECT reliability, cooldown_until
  FROM node_outcome_record(%(node)s, %(success)s, %(now)s, %(pa)s, %(pb)s, %(half)s)
