import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "computepool.settings")
application = get_wsgi_application()

from computepool.warm import warm_and_freeze  # noqa: E402 - after the application's setup

warm_and_freeze()
