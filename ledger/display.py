"""Money as people read it: grouped digits, two decimals and the unit.

Stored and computed money stays integers (credit minor units, paise); this module only renders
it, on top of the exact text of `quotes.format_minor` and `quotes.format_paise` (which the API
and the exports return), so a page, the admin and the API never disagree by a paisa.
"""

from collections.abc import Callable

from django.contrib import admin

from ledger.quotes import format_minor, format_paise


def _grouped(exact: str) -> tuple[str, str]:
    """ "-1234567.89" → ("-", "1,234,567.89")."""
    sign, digits = ("-", exact[1:]) if exact.startswith("-") else ("", exact)
    whole, _, part = digits.partition(".")
    return sign, f"{int(whole):,}.{part}"


def credits(minor: int) -> str:
    """Credit minor units as credits: 378000 → "3,780.00 credits"."""
    sign, text = _grouped(format_minor(minor))
    return f"{sign}{text} credits"


def rupees(paise: int) -> str:
    """Paise as rupees: 302400 → "₹3,024.00"; the sign before the symbol."""
    sign, text = _grouped(format_paise(paise))
    return f"{sign}₹{text}"


def credits_per_s(minor: int) -> str:
    """A price per second of work: 105 → "1.05 credits/s"."""
    return f"{credits(minor)}/s"


def money_column(field: str, show: Callable[[int], str], description: str | None = None):
    """An admin `list_display` column showing an integer money field through `show`, still
    sortable by the field itself."""

    label = description or field.removesuffix("_minor").removesuffix("_paise").replace("_", " ")

    @admin.display(description=label, ordering=field)
    def column(obj: object) -> str:
        value = getattr(obj, field)
        return "—" if value is None else show(value)

    return column
