from ledger.registry import INT, STR, register

register("ApiKeyIssued", properties={"key_id": INT, "role": STR, "name": STR, "prefix": STR})
register("ApiKeyRevoked", properties={"key_id": INT, "prefix": STR})
register("RoleGranted", properties={"role": STR})
register("PublicNameSet", properties={"show_name": {"type": "boolean"}, "public_name": STR})
