-- The node an agent key belongs to (nodes.auth.resolve_agent_key), run by every agent request.
-- One index probe on the key's hash (agent_key_hash, unique), then the node and its operator
-- by primary key. No row: no such key, a revoked key, or an operator who was deactivated.
-- Reads only; takes no lock. Returns every column of the node, for Model.from_db.
SELECT n.*
  FROM nodes_agentkey k
  JOIN nodes_node n ON n.id = k.node_id
  JOIN auth_user u ON u.id = n.operator_id
 WHERE k.key_hash = %s
   AND n.key_revoked_at IS NULL
   AND u.is_active
