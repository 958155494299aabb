from celery import shared_task

from webhooks.services import deliveries_sweep, delivery_attempt


@shared_task(name="webhooks.deliver", bind=True, ignore_result=True, max_retries=None)
def deliver(self, delivery_id: int) -> None:
    """One attempt at a delivery; a failure it may retry comes back after its backoff. The
    attempt budget is the delivery's own (WEBHOOK_MAX_ATTEMPTS), not Celery's."""
    retry_in = delivery_attempt(delivery_id=delivery_id)
    if retry_in is not None:
        raise self.retry(countdown=retry_in)


@shared_task(name="webhooks.sweep", ignore_result=True)
def sweep() -> int:
    """Ask again for deliveries whose message was lost; a double fire sends nothing twice."""
    return deliveries_sweep()
