"""Money, percentages and times as the pages and the admin show them: one rule each."""

from datetime import UTC, datetime, timedelta, timezone

from django.template import Context, Template

from core.display import percent
from ledger.display import credits, credits_per_s, rupees


def render(text: str, **context) -> str:
    return Template("{% load display %}" + text).render(Context(context))


def test_credits_are_minor_units_with_two_decimals_and_grouped_digits():
    assert credits(378_000) == "3,780.00 credits"
    assert credits(5) == "0.05 credits"
    assert credits(0) == "0.00 credits"
    assert credits(-123_456_789) == "-1,234,567.89 credits"
    assert credits_per_s(105) == "1.05 credits/s"


def test_rupees_are_paise_with_the_rupee_sign_after_any_minus():
    assert rupees(302_400) == "₹3,024.00"
    assert rupees(50_000) == "₹500.00"
    assert rupees(7) == "₹0.07"
    assert rupees(-3_024) == "-₹30.24"


def test_reliability_is_a_percentage():
    assert percent(0.9734) == "97.3%"
    assert percent(1.0) == "100.0%"
    assert percent(0) == "0.0%"
    assert percent(None) == "—"


def test_the_filters_render_the_same_rules_in_a_template():
    text = render(
        "{{ a|credits }} | {{ p|rupees }} | {{ r|percent }} | {{ n|credits }}",
        a=378_000,
        p=302_400,
        r=0.5,
        n=None,
    )
    assert text == "3,780.00 credits | ₹3,024.00 | 50.0% | —"


def test_a_time_is_written_in_utc_to_the_second_for_the_browser_to_localise():
    ist = timezone(timedelta(hours=5, minutes=30))
    moment = datetime(2026, 11, 27, 18, 12, 45, 987_000, tzinfo=ist)
    assert render("{{ t|when }}", t=moment) == (
        '<time datetime="2026-11-27T12:42:45Z">2026-11-27 12:42:45 UTC</time>'
    )
    assert render("{{ t|when }}", t=None) == "—"
    assert render("{{ t|when }}", t=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)).startswith(
        '<time datetime="2026-01-02T03:04:05Z">'
    )
