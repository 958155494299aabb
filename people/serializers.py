from rest_framework import serializers

from people.models import ApiKey, Role


class ApiKeyOut(serializers.ModelSerializer):
    class Meta:
        model = ApiKey
        fields = ("id", "name", "role", "prefix", "created_at", "last_used_at", "revoked_at")


class ApiKeyIn(serializers.Serializer):
    role = serializers.ChoiceField(choices=Role.choices)
    name = serializers.CharField(max_length=100, allow_blank=False)


class ApiKeyCreated(serializers.Serializer):
    key = ApiKeyOut()
    secret = serializers.CharField(help_text="The key itself. Shown once; store it now.")


class MeOut(serializers.Serializer):
    id = serializers.IntegerField()
    username = serializers.CharField()
    roles = serializers.ListField(child=serializers.CharField())
    acting_as = serializers.ListField(child=serializers.CharField())
