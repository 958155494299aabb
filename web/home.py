"""The landing page, and each person's account home: what they hold, by role."""

from django.contrib.auth.mixins import LoginRequiredMixin
from django.views.generic import TemplateView

from core.api.permissions import session_roles
from ledger.pricing import NoRulesInForce, rules_at
from ledger.quotes import BPS, minor_to_paise_floor
from ledger.selectors import user_balances
from people.models import ApiKey, PublicProfile
from web.public_name import PublicNameForm


class LandingPage(TemplateView):
    template_name = "web/landing.html"

    def get_context_data(self, **kwargs) -> dict[str, object]:
        try:
            rules = rules_at()
        except NoRulesInForce:
            return super().get_context_data(**kwargs)
        # The operator's share and the minimum cashout are the price book's, not the page's.
        return super().get_context_data(
            operator_share=(BPS - rules.platform_fee_bps) / BPS,
            min_cashout_paise=rules.min_cashout_paise,
            **kwargs,
        )


class HomePage(LoginRequiredMixin, TemplateView):
    template_name = "web/home.html"

    def get_context_data(self, **kwargs) -> dict[str, object]:
        user = self.request.user
        balances = user_balances(user_id=user.pk)
        try:
            paise_per_credit: int | None = rules_at().paise_per_credit
        except NoRulesInForce:
            paise_per_credit = None  # no price book yet: credits only, no rupee figure

        def in_paise(minor: int) -> int | None:
            if paise_per_credit is None:
                return None
            return minor_to_paise_floor(minor, paise_per_credit=paise_per_credit)

        roles = session_roles(user)
        public_name_form = None
        if "operator" in roles:
            profile = PublicProfile.objects.filter(user=user).first()
            public_name_form = PublicNameForm(
                initial={
                    "show_name": profile.show_name if profile else False,
                    "public_name": profile.public_name if profile else "",
                }
            )
        return super().get_context_data(
            roles=roles,
            public_name_form=public_name_form,
            balances=balances,
            earnings_paise=in_paise(balances.earnings),
            cashout_pending_paise=in_paise(balances.cashout_pending),
            active_keys=ApiKey.objects.filter(user=user, revoked_at__isnull=True).count(),
            **kwargs,
        )
