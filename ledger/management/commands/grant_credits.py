from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from core.errors import DomainError
from ledger.funding import credits_grant
from ledger.quotes import format_minor, parse_credits


class Command(BaseCommand):
    help = (
        "Grant credits to a user from external funding (finance). Idempotent: the same --key "
        "again changes nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("user", help="username, or #<id>")
        parser.add_argument("credits", help='amount in credits, e.g. "500" or "12.50"')
        parser.add_argument("--key", required=True, help="idempotency key (e.g. a ticket id)")
        parser.add_argument("--reference", default="", help="why, for the statement")
        parser.add_argument("--actor", default="manage.py grant_credits")

    def handle(self, *args, **options):
        who = options["user"]
        users = get_user_model().objects
        if who.startswith("#") and who[1:].isdigit():
            user = users.filter(pk=int(who[1:])).first()
        else:
            user = users.filter(username=who).first()
        if user is None:
            raise CommandError(f"no user {who!r}")
        try:
            amount = parse_credits(options["credits"])
            entry = credits_grant(
                user_id=user.pk,
                amount=amount,
                actor=options["actor"],
                reference=options["reference"],
                idempotency_key=options["key"],
            )
        except (ValueError, DomainError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"granted {format_minor(amount)} credits to {user.get_username()} (entry {entry.pk})"
        )
