"""Key material: generation and hashing, shared by person keys and agent keys."""

import hashlib
import secrets

PERSON_PREFIX = "cpk_"
AGENT_PREFIX = "cpa_"


def generate_key(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def display_prefix(key: str) -> str:
    return key[:12]
