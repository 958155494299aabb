"""A submitter's credits: what is available and held now, and every posting that moved them.

The figures are the ledger's own reads (ledger.selectors.user_balances and
ledger.statements.statement_lines, which the statement API and its CSV use)."""

from datetime import UTC, datetime

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views import View

from ledger.selectors import user_balances
from ledger.statements import statement_lines
from web.roles import SubmitterPage

PAGE_SIZE = 50
# The history runs from the first entry the books can hold.
BEGINNING = datetime(2000, 1, 1, tzinfo=UTC)


class CreditsPage(SubmitterPage, View):
    """The balances, then the postings oldest first, a page at a time forward by posting id
    (a keyset, as the statement's lines are read)."""

    def get(self, request: HttpRequest) -> HttpResponse:
        after_text = request.GET.get("after", "")
        ok = after_text.isascii() and after_text.isdigit() and len(after_text) <= 18
        after = int(after_text) if ok else 0
        lines = list(
            statement_lines(
                user_id=request.user.pk,
                period_from=BEGINNING,
                period_to=timezone.now(),
                after=after,
                limit=PAGE_SIZE + 1,
            )
        )
        more = len(lines) > PAGE_SIZE
        lines = lines[:PAGE_SIZE]
        for line in lines:
            line["recorded_at"] = datetime.fromisoformat(line["recorded_at"])
        return render(
            request,
            "web/credits/credits.html",
            {
                "balances": user_balances(user_id=request.user.pk),
                "lines": lines,
                "next_after": lines[-1]["posting_id"] if more else None,
                "first_page": after == 0,
            },
        )
