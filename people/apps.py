from django.apps import AppConfig


class PeopleConfig(AppConfig):
    name = "people"
    verbose_name = "People and API keys"

    def ready(self) -> None:
        from people import events  # noqa: F401 - registers event types
