"""Template filters: money, percentages and times as people read them.

{% load display %}
{{ balances.available|credits }}   → 3,780.00 credits
{{ cashout.inr_paise|rupees }}     → ₹30.24
{{ node.reliability|percent }}     → 97.3%
{{ key.created_at|when }}          → <time datetime="…Z">… UTC</time>, shown in the
                                     viewer's time zone by web/local-time.js
"""

from datetime import UTC, datetime

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from core import display as figures
from ledger import display as money

register = template.Library()
NOTHING = "—"


@register.filter
def credits(minor: int | None) -> str:
    return NOTHING if minor is None or minor == "" else money.credits(int(minor))


@register.filter
def rupees(paise: int | None) -> str:
    return NOTHING if paise is None or paise == "" else money.rupees(int(paise))


@register.filter
def percent(fraction: float | None, places: int = 1) -> str:
    return figures.percent(None if fraction == "" else fraction, int(places))


@register.filter
def when(moment: datetime | None) -> SafeString | str:
    """A moment to the second. The text is UTC for a reader without JavaScript; the script
    rewrites it in the browser's own time zone from the machine-readable attribute."""
    if not isinstance(moment, datetime):
        return NOTHING
    utc = moment.astimezone(UTC)
    return format_html(
        '<time datetime="{}">{}</time>',
        utc.strftime("%Y-%m-%dT%H:%M:%SZ"),
        utc.strftime("%Y-%m-%d %H:%M:%S UTC"),
    )
