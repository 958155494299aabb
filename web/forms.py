from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import UserCreationForm

from people.models import Role

User = get_user_model()

SIGNUP_ROLES = [
    (Role.SUBMITTER.value, "Submit jobs and pay in credits (submitter)"),
    (Role.OPERATOR.value, "Run a node and earn credits (operator)"),
]


class SignupForm(UserCreationForm):
    email = forms.EmailField(help_text="Where a password reset link is sent.")
    role = forms.ChoiceField(choices=SIGNUP_ROLES, widget=forms.RadioSelect, label="I want to")

    class Meta(UserCreationForm.Meta):
        model = User
        fields = ("username", "email")

    def clean_email(self) -> str:
        email = self.cleaned_data["email"].strip()
        # One account per address: a reset link must reach the one person who asked.
        if User.objects.filter(email__iexact=email).exists():
            raise forms.ValidationError("An account with this email exists: log in instead.")
        return email


class KeyForm(forms.Form):
    name = forms.CharField(max_length=100, strip=True, help_text="Where you will use it.")
    role = forms.ChoiceField(help_text="A key acts as exactly one of your roles.")

    def __init__(self, *args, roles: list[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["role"].choices = [(role, role) for role in roles]
