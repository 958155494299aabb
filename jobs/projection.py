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

    def apply(self, event: Event) -> None:
        kind, p = event.type, event.payload
        if kind == "JobSubmitted":
            self.jobs[p["job_id"]] = ["queued", p["slices"]]
            for index in range(p["slices"]):
                self.tasks[(p["job_id"], index)] = ["queued", 0]
        elif kind == "JobStarted":
            self.jobs[p["job_id"]][0] = "running"
        elif kind == "JobFinished":
            self.jobs[p["job_id"]][0] = p["state"]
        elif kind in _TASK_STATE or kind in ("AttemptFailed", "AttemptLost"):
            task = self.tasks[(p["job_id"], p["index"])]
            task[0] = _TASK_STATE.get(kind) or p["outcome"].replace("requeued", "queued")
            if kind == "TaskClaimed":
                task[1] += 1

    def diff(self) -> list[str]:
        from jobs.models import Job, Task

        problems: list[str] = []
        live_jobs = dict(Job.objects.values_list("id", "state"))
        for job_id in sorted(set(live_jobs) | set(self.jobs)):
            replayed = self.jobs.get(job_id, [None])[0]
            if live_jobs.get(job_id) != replayed:
                problems.append(
                    f"jobs: job {job_id} is {live_jobs.get(job_id)} in the table, "
                    f"{replayed} in the log"
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
        return problems
