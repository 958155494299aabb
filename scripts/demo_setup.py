"""Demo helper: creates the demo's people and keys; prints shell assignments for demo.sh.

    python scripts/demo_setup.py people
"""

import os
import secrets
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "computepool.settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.db import transaction  # noqa: E402

from people.services import api_key_create, role_grant  # noqa: E402


def people() -> None:
    User = get_user_model()  # noqa: N806
    password = secrets.token_urlsafe(12)
    with transaction.atomic():
        admin, _ = User.objects.get_or_create(
            username="admin", defaults={"is_staff": True, "is_superuser": True}
        )
        admin.is_staff = admin.is_superuser = True
        admin.set_password(password)
        admin.save()
        role_grant(user=admin, role="admin", actor="demo")
        keys = {}
        for username, role in (("alice", "submitter"), ("bob", "operator")):
            user, _ = User.objects.get_or_create(username=username)
            role_grant(user=user, role=role, actor="demo")
            _, keys[role] = api_key_create(user=user, role=role, name="demo", actor="demo")
    print(f"ADMIN_PASSWORD={password}")
    print(f"SUBMITTER_KEY={keys['submitter']}")
    print(f"OPERATOR_KEY={keys['operator']}")


if __name__ == "__main__":
    {"people": people}[sys.argv[1]]()
