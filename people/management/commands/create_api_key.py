from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from core.errors import DomainError
from people.models import Role
from people.services import api_key_create, role_grant


class Command(BaseCommand):
    help = "Issue an API key for a user acting as one role; prints the key once."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("role", choices=Role.values)
        parser.add_argument("--name", default="")
        parser.add_argument(
            "--create-user",
            action="store_true",
            help="create the user (and grant the role) if it does not exist",
        )

    def handle(self, *args, **opts):
        User = get_user_model()
        user = User.objects.filter(username=opts["username"]).first()
        if user is None:
            if not opts["create_user"]:
                raise CommandError(f"no user {opts['username']!r} (use --create-user)")
            user = User.objects.create_user(username=opts["username"])
        if opts["create_user"]:
            role_grant(user=user, role=opts["role"], actor="cli")
        try:
            _, secret = api_key_create(
                user=user, role=opts["role"], name=opts["name"] or opts["role"], actor="cli"
            )
        except DomainError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(secret)
