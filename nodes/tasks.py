from celery import shared_task

from nodes.services import benchmarks_pass, nodes_reap, nodes_reliability_decay


@shared_task(name="nodes.reap", ignore_result=True)
def reap() -> dict[str, int]:
    """Move silent nodes to degraded and offline; a double fire moves nothing twice."""
    result = nodes_reap()
    return {"degraded": result.degraded, "offline": result.offline}


@shared_task(name="nodes.decay_reliability", ignore_result=True)
def decay_reliability() -> int:
    """Decay reliability evidence towards the prior; a double fire changes nothing."""
    return nodes_reliability_decay()


@shared_task(name="nodes.benchmarks", ignore_result=True)
def benchmarks() -> dict[str, int]:
    """Expire benchmarks past their deadline, issue the due ones; idempotent within a pass."""
    return benchmarks_pass()
