"""Jobs and tasks as the log tells them, against the jobs and tasks tables (verify_ledger)."""

from ledger.models import Event

_TASK_STATE = {
    "TaskClaimed": "leased",
    "TaskStarted": "running",
    "AttemptSucceeded": "succeeded",
    "TaskCancelled": "cancelled",
}


def _marks_disagree(
    table: set[int], log: set[int], what: str, marks: tuple[str, str], event: str
) -> list[str]:
    """The jobs marked in the table (marks[0]) but without `event` in the log, or the other
    way round (marks[1])."""
    return [
        f"jobs: job {job_id}'s {what} {marks[0] if job_id in table else marks[1]} in the "
        f"table, with {event if job_id in log else 'no ' + event.split(' ', 1)[1]} in the log"
        for job_id in sorted(table ^ log)
    ]


class TasksProjection:
    name = "jobs"

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.jobs: dict[int, list] = {}  # job_id -> [state, slices]
        # task_id -> [state, attempts], for every task the log has spoken of; the others are
        # still as submitted: queued, never claimed.
        self.tasks: dict[int, list] = {}
        self.task_count: dict[int, int] = {}  # job_id -> its tasks: submitted and added
        self.settled: dict[int, int] = {}  # attempt_id -> its settlements (by a hold or spot-check)
        self.cancel_requested: set[int] = set()  # jobs with a JobCancelRequested
        self.artifacts_expired: set[int] = set()  # jobs with an ArtifactsExpired

    def apply(self, event: Event) -> None:
        kind, p = event.type, event.payload
        if kind in ("AttemptSettled", "SpotCheckSettled"):
            self.settled[p["attempt_id"]] = self.settled.get(p["attempt_id"], 0) + 1
        elif kind == "JobSubmitted":
            self.jobs[p["job_id"]] = ["queued", p["slices"]]
            self.task_count[p["job_id"]] = p["slices"] * p.get("replicas", 1)
        elif kind == "ReplicaAdded":
            self.task_count[p["job_id"]] += 1
        elif kind == "JobStarted":
            self.jobs[p["job_id"]][0] = "running"
        elif kind == "JobCancelRequested":
            self.cancel_requested.add(p["job_id"])
        elif kind == "ArtifactsExpired":
            self.artifacts_expired.add(p["job_id"])
        elif kind == "JobFinished":
            self.jobs[p["job_id"]][0] = p["state"]
        elif kind in _TASK_STATE or kind in ("AttemptFailed", "AttemptLost", "AttemptHandedBack"):
            task = self.tasks.setdefault(p["task_id"], ["queued", 0])
            task[0] = _TASK_STATE.get(kind) or p["outcome"].replace("requeued", "queued")
            if kind == "TaskClaimed":
                task[1] += 1

    def diff(self) -> list[str]:
        from jobs.models import ACTIVE_ATTEMPT_STATES, Attempt, Job, Task, Verdict

        problems: list[str] = []
        live_jobs, flagged, expired = {}, set(), set()
        for job_id, state, cancel_requested_at, artifacts_expired_at in Job.objects.values_list(
            "id", "state", "cancel_requested_at", "artifacts_expired_at"
        ).iterator(chunk_size=10_000):
            live_jobs[job_id] = state
            if cancel_requested_at is not None:
                flagged.add(job_id)
            if artifacts_expired_at is not None:
                expired.add(job_id)
        for job_id in sorted(set(live_jobs) | set(self.jobs)):
            replayed = self.jobs.get(job_id, [None])[0]
            if live_jobs.get(job_id) != replayed:
                problems.append(
                    f"jobs: job {job_id} is {live_jobs.get(job_id)} in the table, "
                    f"{replayed} in the log"
                )
        # The cancel flag that stops every attempt of a job is set exactly when the log has
        # its JobCancelRequested: a lost flag would let a cancelled job's task run on.
        problems += _marks_disagree(
            flagged, self.cancel_requested, "cancel flag is", ("set", "not set"),
            "a JobCancelRequested",
        )  # fmt: skip
        # Outputs are marked deleted exactly when the log says retention deleted them.
        problems += _marks_disagree(
            expired, self.artifacts_expired, "outputs are", ("deleted", "kept"),
            "an ArtifactsExpired",
        )  # fmt: skip
        live_tasks, live_count = {}, {}
        for task_id, job_id, state, attempts in Task.objects.values_list(
            "id", "job_id", "state", "attempts"
        ).iterator(chunk_size=10_000):
            live_tasks[task_id] = [state, attempts]
            live_count[job_id] = live_count.get(job_id, 0) + 1
        for job_id in sorted(set(live_count) | set(self.task_count)):
            if live_count.get(job_id, 0) != self.task_count.get(job_id, 0):
                problems.append(
                    f"jobs: job {job_id} has {live_count.get(job_id, 0)} tasks in the table, "
                    f"{self.task_count.get(job_id, 0)} in the log"
                )
        for task_id in sorted(set(live_tasks) | set(self.tasks)):
            replayed = self.tasks.get(task_id, ["queued", 0] if task_id in live_tasks else None)
            if live_tasks.get(task_id) != replayed:
                problems.append(
                    f"jobs: task {task_id} is {live_tasks.get(task_id)} "
                    f"(state, attempts) in the table, {replayed} in the log"
                )
                if len(problems) > 50:
                    break
        # Every attempt that ended is settled exactly once (at zero when not charged), but a
        # verified slice's result that waits for its verdict (jobs.verification), not yet.
        ended = (
            Attempt.objects.exclude(state__in=ACTIVE_ATTEMPT_STATES)
            .exclude(verdict=Verdict.PENDING)
            .values_list("id", flat=True)
        )
        for attempt_id in ended.iterator(chunk_size=10_000):
            count = self.settled.get(attempt_id, 0)
            if count != 1:
                problems.append(f"jobs: attempt {attempt_id} ended with {count} settlements")
                if len(problems) > 100:
                    break
        return problems
