"""Jobs and tasks as the log tells them, against the jobs and tasks tables (verify_ledger)."""

from ledger.models import Event

_TASK_STATE = {
    "TaskClaimed": "leased",
    "TaskStarted": "running",
    "AttemptSucceeded": "succeeded",
    "TaskCancelled": "cancelled",
}


class TasksProjection:
    name = "jobs"

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.jobs: dict[int, list] = {}  # job_id -> [state, slices]
        self.tasks: dict[tuple[int, int], list] = {}  # (job_id, index) -> [state, attempts]
        self.settled: dict[int, int] = {}  # attempt_id -> AttemptSettled events
        self.cancel_requested: set[int] = set()  # jobs with a JobCancelRequested

    def apply(self, event: Event) -> None:
        kind, p = event.type, event.payload
        if kind == "AttemptSettled":
            self.settled[p["attempt_id"]] = self.settled.get(p["attempt_id"], 0) + 1
        elif kind == "JobSubmitted":
            self.jobs[p["job_id"]] = ["queued", p["slices"]]
            for index in range(p["slices"]):
                self.tasks[(p["job_id"], index)] = ["queued", 0]
        elif kind == "JobStarted":
            self.jobs[p["job_id"]][0] = "running"
        elif kind == "JobCancelRequested":
            self.cancel_requested.add(p["job_id"])
        elif kind == "JobFinished":
            self.jobs[p["job_id"]][0] = p["state"]
        elif kind in _TASK_STATE or kind in ("AttemptFailed", "AttemptLost"):
            task = self.tasks[(p["job_id"], p["index"])]
            task[0] = _TASK_STATE.get(kind) or p["outcome"].replace("requeued", "queued")
            if kind == "TaskClaimed":
                task[1] += 1

    def diff(self) -> list[str]:
        from jobs.models import ACTIVE_ATTEMPT_STATES, Attempt, Job, Task

        problems: list[str] = []
        live_jobs, flagged = {}, set()
        for job_id, state, cancel_requested_at in Job.objects.values_list(
            "id", "state", "cancel_requested_at"
        ).iterator(chunk_size=10_000):
            live_jobs[job_id] = state
            if cancel_requested_at is not None:
                flagged.add(job_id)
        for job_id in sorted(set(live_jobs) | set(self.jobs)):
            replayed = self.jobs.get(job_id, [None])[0]
            if live_jobs.get(job_id) != replayed:
                problems.append(
                    f"jobs: job {job_id} is {live_jobs.get(job_id)} in the table, "
                    f"{replayed} in the log"
                )
        # The cancel flag that stops every attempt of a job is set exactly when the log has
        # its JobCancelRequested: a lost flag would let a cancelled job's task run on.
        for job_id in sorted(flagged ^ self.cancel_requested):
            said = "a" if job_id in self.cancel_requested else "no"
            problems.append(
                f"jobs: job {job_id}'s cancel flag is "
                f"{'set' if job_id in flagged else 'not set'} in the table, with {said} "
                "JobCancelRequested in the log"
            )
        live_tasks = {
            (job_id, index): [state, attempts]
            for job_id, index, state, attempts in Task.objects.values_list(
                "job_id", "index", "state", "attempts"
            ).iterator(chunk_size=10_000)
        }
        for key in sorted(set(live_tasks) | set(self.tasks)):
            if live_tasks.get(key) != self.tasks.get(key):
                problems.append(
                    f"jobs: task {key[0]}#{key[1]} is {live_tasks.get(key)} "
                    f"(state, attempts) in the table, {self.tasks.get(key)} in the log"
                )
                if len(problems) > 50:
                    break
        # Every attempt that ended is settled exactly once (at zero when not charged).
        ended = Attempt.objects.exclude(state__in=ACTIVE_ATTEMPT_STATES).values_list(
            "id", flat=True
        )
        for attempt_id in ended.iterator(chunk_size=10_000):
            count = self.settled.get(attempt_id, 0)
            if count != 1:
                problems.append(f"jobs: attempt {attempt_id} ended with {count} settlements")
                if len(problems) > 100:
                    break
        return problems
