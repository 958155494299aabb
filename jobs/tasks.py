from celery import shared_task

from jobs.leases import leases_reap


@shared_task(name="jobs.reap_leases", ignore_result=True)
def reap_leases() -> int:
    """Return expired leases to the queue; a double fire finds nothing left to do."""
    return leases_reap()


@shared_task(name="jobs.reprice_market", ignore_result=True)
def reprice_market() -> int:
    """Move spot prices one step with supply and demand; a double fire moves nothing twice."""
    from jobs.market import market_reprice

    return len(market_reprice())


@shared_task(name="jobs.expire_artifacts", ignore_result=True)
def expire_artifacts() -> int:
    """Delete the outputs of jobs whose retention has run out; a double fire shares the jobs."""
    from jobs.retention import artifacts_expire

    return artifacts_expire()
