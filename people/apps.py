from django.apps import AppConfig


class PeopleConfig(AppConfig):
    name = "people"
    verbose_name = "People and API keys"

    def ready(self) -> None:
        from people import events, schema  # noqa: F401 - event types, the OpenAPI auth scheme
