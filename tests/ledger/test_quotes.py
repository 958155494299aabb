"""The pure money maths and the quote endpoint: the worked example of docs/economy.md."""

from decimal import Decimal

import pytest

from ledger import quotes


def test_it_works_the_documented_example_rtx_4090_in_india():
    price = quotes.spot_initial(
        base_per_s_minor=50, tier_multiplier=Decimal("3.0"), region_multiplier=Decimal("0.7")
    )
    cost = quotes.cost_minor(price_per_s_minor=price, billed_ms=3_600_000)
    split = quotes.fee_split(cost=cost, fee_bps=2000)
    assert (price, cost, split.fee, split.operator) == (105, 378_000, 75_600, 302_400)
    assert quotes.minor_to_paise(split.operator, paise_per_credit=1) == 3_024  # ₹30.24
    assert quotes.format_minor(cost) == "3780.00" and quotes.format_paise(3_024) == "30.24"


def test_it_works_the_documented_example_gtx_1080_in_the_uk():
    price = quotes.spot_initial(
        base_per_s_minor=50, tier_multiplier=Decimal("1.5"), region_multiplier=Decimal("1.0")
    )
    earnings = quotes.node_earnings_per_hour(
        price_per_s_minor=price, fee_bps=2000, paise_per_credit=1
    )
    assert (price, earnings.gross_per_hour_minor, earnings.fee_per_hour_minor) == (
        75,
        270_000,
        54_000,
    )
    assert (earnings.operator_per_hour_minor, earnings.operator_per_hour_paise) == (216_000, 2_160)


@pytest.mark.parametrize(
    ("price", "ms", "cost"),
    [(105, 999, 104), (105, 1, 0), (1, 999, 0), (1, 1000, 1), (7, 1500, 10), (0, 10_000, 0)],
)
def test_cost_rounds_down_to_a_whole_minor_unit(price, ms, cost):
    assert quotes.cost_minor(price_per_s_minor=price, billed_ms=ms) == cost


@pytest.mark.parametrize(("cost", "fee", "operator"), [(9, 1, 8), (4, 0, 4), (5, 1, 4), (1, 0, 1)])
def test_the_fee_rounds_down_and_the_remainder_goes_to_the_operator(cost, fee, operator):
    split = quotes.fee_split(cost=cost, fee_bps=2000)
    assert (split.fee, split.operator) == (fee, operator)
    assert split.fee + split.operator == cost


def test_the_timeout_caps_the_billed_time():
    assert quotes.billed_ms(runtime_ms=10_000, timeout_ms=4_000) == 4_000
    assert quotes.billed_ms(runtime_ms=3_000, timeout_ms=4_000) == 3_000


def test_it_refuses_floats_anywhere_in_money():
    with pytest.raises(TypeError):
        quotes.cost_minor(price_per_s_minor=1.5, billed_ms=1000)
    with pytest.raises(TypeError):
        quotes.fee_split(cost=10.0, fee_bps=2000)


def test_a_job_quote_holds_ceiling_times_timeout_times_slices():
    quote = quotes.job_quote(ceiling_per_s_minor=200, timeout_s=600, slices=4, spot_per_s_minor=105)
    assert quote.max_minor == 200 * 600 * 4
    assert quote.expected_minor == 105 * 600 * 4 and quote.within_ceiling
    too_low = quotes.job_quote(
        ceiling_per_s_minor=100, timeout_s=600, slices=1, spot_per_s_minor=105
    )
    assert not too_low.within_ceiling and too_low.expected_minor == 0
    short = quotes.job_quote(
        ceiling_per_s_minor=200,
        timeout_s=600,
        slices=1,
        spot_per_s_minor=105,
        expected_runtime_s=60,
    )
    assert short.expected_minor == 105 * 60


def test_cashout_figures_are_whole_paise_and_the_fee_rounds_down_to_a_paisa():
    figures = quotes.cashout_figures(amount=5_000_000, fee_bps=150, paise_per_credit=1)
    assert (figures.fee, figures.net, figures.inr_paise) == (75_000, 4_925_000, 49_250)
    odd = quotes.cashout_figures(amount=10_100, fee_bps=150, paise_per_credit=1)
    assert odd.fee == 100  # 151.5 minor units of fee, rounded down to one whole paisa (100)
    with pytest.raises(ValueError, match="multiple of 100"):
        quotes.cashout_figures(amount=5_000_050, fee_bps=0, paise_per_credit=1)
    assert quotes.paise_granularity(10) == 10 and quotes.paise_granularity(3) == 100


@pytest.mark.django_db
@pytest.mark.usefixtures("price_books")
def test_the_quote_endpoint_answers_jobs_and_nodes(api, alice, bob):
    job = api(alice, "submitter").get(
        "/api/v1/quote",
        {
            "for": "job",
            "tier": "rtx-4090",
            "region": "IN",
            "ceiling_per_s_minor": 150,
            "timeout_s": 3600,
            "slices": 2,
        },
    )
    assert job.status_code == 200, job.json()
    assert job.json()["max_minor"] == 150 * 3600 * 2
    assert job.json()["expected_credits"] == "7560.00"  # 105/s for 2 hours
    verified = api(alice, "submitter").get(
        "/api/v1/quote",
        {
            "for": "job",
            "tier": "rtx-4090",
            "region": "IN",
            "ceiling_per_s_minor": 150,
            "timeout_s": 3600,
            "slices": 2,
            "replicas": 3,
        },
    )
    # Each agreeing replica is paid: three runs of each slice, held and expected.
    assert verified.json()["max_minor"] == 150 * 3600 * 2 * 3
    assert verified.json()["expected_credits"] == "22680.00"
    node = api(bob, "operator").get(
        "/api/v1/quote", {"for": "node", "tier": "gtx-1080", "region": "GB", "floor_per_s_minor": 0}
    )
    assert node.status_code == 200, node.json()
    assert node.json()["operator_per_hour_inr"] == "21.60"
    floored = api(bob, "operator").get(
        "/api/v1/quote",
        {"for": "node", "tier": "gtx-1080", "region": "GB", "floor_per_s_minor": 100},
    )
    assert floored.json()["price_per_s_minor"] == 100


@pytest.mark.django_db
@pytest.mark.usefixtures("price_books")
def test_the_quote_endpoint_says_what_is_wrong(api, alice, client):
    bad = api(alice, "submitter").get("/api/v1/quote", {"for": "job", "tier": "rtx-4090"})
    assert bad.status_code == 400
    assert set(bad.json()["fields"]) == {"ceiling_per_s_minor", "timeout_s"}
    unknown = api(alice, "submitter").get(
        "/api/v1/quote", {"for": "node", "tier": "abacus", "region": "in"}
    )
    assert unknown.status_code == 400 and unknown.json()["error"] == "unknown_tier"
    assert client.get("/api/v1/quote", {"tier": "cpu"}).status_code in (401, 403)


@pytest.mark.django_db
@pytest.mark.usefixtures("price_books")
@pytest.mark.parametrize("region", ["xx", "XX", "zz"])
def test_the_quote_endpoint_refuses_a_region_that_is_not_a_country(api, bob, region):
    response = api(bob, "operator").get(
        "/api/v1/quote", {"for": "node", "tier": "cpu", "region": region}
    )
    assert response.status_code == 400, response.json()
    assert "ISO 3166-1 alpha-2" in response.json()["fields"]["region"][0]


@pytest.mark.django_db
@pytest.mark.usefixtures("price_books")
def test_the_quote_endpoint_capitalises_a_real_country(api, bob):
    response = api(bob, "operator").get(
        "/api/v1/quote", {"for": "node", "tier": "rtx-4090", "region": "in"}
    )
    assert response.status_code == 200, response.json()
    assert (response.json()["region"], response.json()["spot_per_s_minor"]) == ("IN", 105)
