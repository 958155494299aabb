"""The agent runs only specs the hub signed: any changed byte, wrong key or bad signature fails."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from agent.spec import SpecRejected, canonical_json, verify_spec

SPEC: dict[str, Any] = {
    "attempt_id": 40,
    "job_id": 3,
    "kind": "container",
    "image": "computepool/busybox:1",
    "command": ["sh", "-c", "echo héllo"],
    "env": {"MODE": "fast"},
    "inputs": {"data.txt": "MSAyIDM="},
    "timeout_s": 30.5,
    "resources": {"ram_mb": 1024, "gpus": 0},
    "interpreter": None,
    "urgent": False,
}


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def public_b64(key: Ed25519PrivateKey) -> str:
    return b64(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))


@pytest.fixture(scope="module")
def hub_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


@pytest.fixture(scope="module")
def signature(hub_key: Ed25519PrivateKey) -> str:
    return b64(hub_key.sign(canonical_json(SPEC)))


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every leaf of the spec, so that each field is changed in turn."""
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in _paths(item, (*path, key))]
    if isinstance(value, list):
        return [p for index, item in enumerate(value) for p in _paths(item, (*path, index))]
    return [path]


def _changed(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return not value
    if isinstance(value, int | float):
        return value + 1
    last = chr(ord(value[-1]) ^ 1)  # one byte of the field, different
    return value[:-1] + last


def test_canonical_json_is_sorted_compact_utf8() -> None:
    assert canonical_json({"b": 1, "a": ["é", None]}) == '{"a":["é",null],"b":1}'.encode()


def test_it_accepts_a_spec_the_hub_signed(hub_key: Ed25519PrivateKey, signature: str) -> None:
    verify_spec(copy.deepcopy(SPEC), signature, public_b64(hub_key))


@pytest.mark.parametrize("path", _paths(SPEC), ids=lambda p: ".".join(map(str, p)))
def test_it_refuses_a_spec_with_any_field_changed(
    path: tuple[Any, ...], hub_key: Ed25519PrivateKey, signature: str
) -> None:
    spec = copy.deepcopy(SPEC)
    parent = spec
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = _changed(parent[path[-1]])

    with pytest.raises(SpecRejected, match="does not match"):
        verify_spec(spec, signature, public_b64(hub_key))


def test_it_refuses_an_added_field(hub_key: Ed25519PrivateKey, signature: str) -> None:
    with pytest.raises(SpecRejected):
        verify_spec({**SPEC, "privileged": True}, signature, public_b64(hub_key))


def test_it_refuses_another_key(signature: str) -> None:
    with pytest.raises(SpecRejected, match="does not match"):
        verify_spec(SPEC, signature, public_b64(Ed25519PrivateKey.generate()))


@pytest.mark.parametrize(
    "bad_signature",
    [
        pytest.param("", id="empty"),
        pytest.param("not base64!", id="garbage"),
        pytest.param(b64(b"\0" * 64), id="zeros"),
        pytest.param(b64(b"\0" * 65), id="too-long"),
    ],
)
def test_it_refuses_a_bad_signature(bad_signature: str, hub_key: Ed25519PrivateKey) -> None:
    with pytest.raises(SpecRejected):
        verify_spec(SPEC, bad_signature, public_b64(hub_key))


def test_it_refuses_a_truncated_signature(hub_key: Ed25519PrivateKey, signature: str) -> None:
    raw = base64.b64decode(signature)

    with pytest.raises(SpecRejected, match="64 bytes"):
        verify_spec(SPEC, b64(raw[:-1]), public_b64(hub_key))


def test_it_refuses_a_signature_with_one_bit_flipped(
    hub_key: Ed25519PrivateKey, signature: str
) -> None:
    raw = bytearray(base64.b64decode(signature))
    raw[10] ^= 1

    with pytest.raises(SpecRejected, match="does not match"):
        verify_spec(SPEC, b64(bytes(raw)), public_b64(hub_key))


@pytest.mark.parametrize("bad_key", ["", "%%%", b64(b"k" * 31)])
def test_it_refuses_a_malformed_key(bad_key: str, signature: str) -> None:
    with pytest.raises(SpecRejected, match="public key"):
        verify_spec(SPEC, signature, bad_key)


def test_it_refuses_a_spec_that_is_not_plain_json(
    hub_key: Ed25519PrivateKey, signature: str
) -> None:
    with pytest.raises(SpecRejected, match="plain JSON"):
        verify_spec({**SPEC, "when": object()}, signature, public_b64(hub_key))
