from django.urls import path

from web import accounts, home, keys

app_name = "web"

urlpatterns = [
    path("", home.LandingPage.as_view(), name="landing"),
    path("signup/", accounts.SignupPage.as_view(), name="signup"),
    path("login/", accounts.LoginPage.as_view(), name="login"),
    path("logout/", accounts.LogoutPage.as_view(), name="logout"),
    path("password-reset/", accounts.PasswordResetPage.as_view(), name="password_reset"),
    path(
        "password-reset/sent/",
        accounts.PasswordResetSentPage.as_view(),
        name="password_reset_sent",
    ),
    path(
        "reset/<uidb64>/<token>/",
        accounts.PasswordResetConfirmPage.as_view(),
        name="password_reset_confirm",
    ),
    path(
        "reset/done/", accounts.PasswordResetCompletePage.as_view(), name="password_reset_complete"
    ),
    path("account/", home.HomePage.as_view(), name="home"),
    path("account/keys/", keys.KeysPage.as_view(), name="keys"),
    path("account/keys/<int:key_id>/revoke/", keys.KeyRevokePage.as_view(), name="key_revoke"),
]
