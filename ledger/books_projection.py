"""The books as the log tells them, against the accounts and postings tables."""

from collections import defaultdict

from django.db.models import Count, Sum

from ledger.models import Account, Entry, Event, Posting


class BooksProjection:
    name = "books"

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.balances: dict[str, int] = defaultdict(int)
        self.opened: dict[str, dict] = {}
        self.entry_events = 0
        self.posting_count = 0

    def apply(self, event: Event) -> None:
        if event.type == "AccountOpened":
            self.opened[event.payload["code"]] = event.payload
        postings = event.payload.get("postings") if isinstance(event.payload, dict) else None
        if postings:
            self.entry_events += 1
            self.posting_count += len(postings)
            for code, amount, _currency in postings:
                self.balances[code] += amount

    def diff(self) -> list[str]:
        problems: list[str] = []
        accounts = {a.code: a for a in Account.objects.all()}
        posted = dict(
            Posting.objects.values_list("account__code")
            .annotate(total=Sum("amount"))
            .values_list("account__code", "total")
        )
        for code in sorted(set(accounts) | set(self.opened)):
            if code not in accounts:
                problems.append(f"books: account {code} was opened in the log but has no row")
            elif code not in self.opened:
                problems.append(f"books: account {code} has a row but no AccountOpened event")
        for code in sorted(set(self.balances) | set(posted) | set(accounts)):
            replayed = self.balances.get(code, 0)
            from_postings = posted.get(code, 0) or 0
            if replayed != from_postings:
                problems.append(
                    f"books: account {code}: the log says {replayed}, "
                    f"postings sum to {from_postings}"
                )
            account = accounts.get(code)
            if account is None:
                continue
            if account.projected and account.balance != replayed:
                problems.append(
                    f"books: account {code}: balance column {account.balance}, "
                    f"the log says {replayed}"
                )
            if not account.allow_negative and replayed < 0:
                problems.append(f"books: account {code} is negative ({replayed}) but may not be")
        entries = Entry.objects.count()
        if entries != self.entry_events:
            problems.append(
                f"books: {entries} entries, but {self.entry_events} events carry postings"
            )
        postings = Posting.objects.count()
        if postings != self.posting_count:
            problems.append(f"books: {postings} postings, but the log records {self.posting_count}")
        problems.extend(_unbalanced_entries())
        problems.extend(_entries_without_postings())
        return problems


def _unbalanced_entries() -> list[str]:
    rows = (
        Posting.objects.values_list("entry_id", "currency")
        .annotate(total=Sum("amount"))
        .exclude(total=0)
        .order_by()[:20]
    )
    return [f"books: entry {e} postings sum to {s} {c}, not zero" for e, c, s in rows]


def _entries_without_postings() -> list[str]:
    empty = Entry.objects.annotate(n=Count("postings")).filter(n__lt=2).values_list("id", flat=True)
    return [f"books: entry {e} has fewer than two postings" for e in empty[:20]]
