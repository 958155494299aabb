import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "computepool.settings")
application = get_wsgi_application()

from core.long_lived import load_views  # noqa: E402 (Django must be set up first)

load_views()
