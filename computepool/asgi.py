import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "computepool.settings")
application = get_asgi_application()

from core.asgi_routes import with_lean_relay  # noqa: E402 (Django must be set up first)
from core.long_lived import freeze_loaded  # noqa: E402

application = with_lean_relay(application)
freeze_loaded()
