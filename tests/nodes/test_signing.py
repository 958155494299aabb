import base64
import stat

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)
from django.core.exceptions import ImproperlyConfigured

from agent.spec import SpecRejected, verify_spec
from nodes import signing

SPEC = {
    "attempt_id": 7,
    "task_id": 3,
    "job_id": 1,
    "kind": "container",
    "image": "computepool/python:3.11",
    "command": ["python", "-c", "print('ü')"],
    "env": {"A": "1"},
    "inputs": {},
    "timeout_s": 60,
    "issued_at": "2026-03-01T12:00:00Z",
}


@pytest.fixture
def key_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.HUB_SIGNING_KEY = None
    signing.reset_cache()
    yield tmp_path
    signing.reset_cache()


def test_it_signs_what_the_agents_own_check_verifies(key_dir):
    verify_spec(SPEC, signing.sign(SPEC), signing.hub_public_key_b64())


def test_it_lets_the_agent_refuse_a_spec_changed_after_signing(key_dir):
    signature = signing.sign(SPEC)
    with pytest.raises(SpecRejected):
        verify_spec(SPEC | {"image": "evil/miner"}, signature, signing.hub_public_key_b64())


def test_it_lets_the_agent_refuse_a_signature_from_another_key(key_dir):
    other = base64.b64encode(
        Ed25519PrivateKey.generate().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    ).decode()
    with pytest.raises(SpecRejected):
        verify_spec(SPEC, signing.sign(SPEC), other)


def test_it_creates_the_key_file_once_with_mode_600_and_reuses_it(key_dir):
    public = signing.hub_public_key_b64()
    path = key_dir / signing.KEY_FILE_NAME
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    signing.reset_cache()
    assert signing.hub_public_key_b64() == public
    assert [p.name for p in key_dir.iterdir()] == [signing.KEY_FILE_NAME]


def test_it_refuses_a_key_file_others_can_read(key_dir):
    signing.hub_public_key_b64()
    (key_dir / signing.KEY_FILE_NAME).chmod(0o644)
    signing.reset_cache()
    with pytest.raises(ImproperlyConfigured, match="chmod 600"):
        signing.hub_public_key_b64()


def test_it_prefers_the_setting_to_the_file(key_dir, settings):
    private = Ed25519PrivateKey.generate()
    raw = private.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    settings.HUB_SIGNING_KEY = base64.b64encode(raw).decode()
    signing.reset_cache()
    expected = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    assert base64.b64decode(signing.hub_public_key_b64()) == expected
    verify_spec(SPEC, signing.sign(SPEC), signing.hub_public_key_b64())
    assert not (key_dir / signing.KEY_FILE_NAME).exists()
