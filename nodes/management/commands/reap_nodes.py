from django.core.management.base import BaseCommand

from nodes.services import nodes_reap


class Command(BaseCommand):
    help = "Run the liveness reaper once (beat runs it every NODE_REAPER_INTERVAL_S)."

    def handle(self, *args, **options):
        result = nodes_reap()
        self.stdout.write(f"degraded: {result.degraded}, offline: {result.offline}")
