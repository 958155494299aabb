"""Where apps above jobs (webhooks) plug into a job's submission and its end.

jobs never imports them; they register their functions here from their AppConfig.ready.

Submitted hook: `fn(job, data)`, called inside `job_submit`'s transaction once the job, its
tasks, its event and its hold are written, with the validated submission (jobs.serializers.JobIn);
not called for an idempotent replay. What it writes commits with the job or not at all; an
exception refuses the submission.

Finished hook: `fn(job_id, state)`, called inside the transaction that ended the job (the last
task's report, a cancel, a reaper batch), after JobFinished is appended. It is on the
completion's path: at most one short statement, anything slow or fallible in
`transaction.on_commit` (never an HTTP request), so that it can neither hold up nor roll back
the end of a job.
"""

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobs.models import Job

SubmittedHook = Callable[["Job", dict[str, Any]], None]
FinishedHook = Callable[[int, str], None]

_submitted_hooks: list[SubmittedHook] = []
_finished_hooks: list[FinishedHook] = []


def register_submitted_hook(fn: SubmittedHook) -> None:
    if fn not in _submitted_hooks:  # ready() may run twice (tests, reloads)
        _submitted_hooks.append(fn)


def register_finished_hook(fn: FinishedHook) -> None:
    if fn not in _finished_hooks:
        _finished_hooks.append(fn)


def job_submitted(job: "Job", data: dict[str, Any]) -> None:
    for hook in _submitted_hooks:
        hook(job, data)


def job_finished(job_id: int, state: str) -> None:
    for hook in _finished_hooks:
        hook(job_id, state)
