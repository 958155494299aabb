"""job.yaml and where downloaded files land: what the client decides without a hub."""

from pathlib import Path

import pytest


@pytest.fixture
def jobfile(client_src_on_path):
    from computepool_client import jobfile

    return jobfile


def test_inputs_are_paths_next_to_the_job_file(jobfile, tmp_path: Path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "in.csv").write_text("a,b\n")
    (tmp_path / "job.yaml").write_text(
        "kind: script\nscript: cat in.csv\nprice_ceiling: 5\ninputs: {in.csv: data/in.csv}\n"
    )
    job = jobfile.load_job_file(tmp_path / "job.yaml")
    assert job["inputs"] == {"in.csv": tmp_path / "data" / "in.csv"}
    assert (job["kind"], job["script"], job["price_ceiling"]) == ("script", "cat in.csv", 5)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: [script\n", "job.yaml: not valid YAML: "),
        ("- kind: script\n", "job.yaml: a job file is a mapping of the job's fields"),
        ("kind: script\nslice: 2\n", "job.yaml: unknown field(s) slice; a job takes command, "),
        ("kind: script\ninputs: [a.txt]\n", "job.yaml: inputs maps a file name to a path"),
        ("kind: script\ninputs: {a.txt: missing.txt}\n", "job.yaml: inputs.a.txt: no file at "),
    ],
)
def test_a_bad_job_file_is_one_clear_error(jobfile, tmp_path: Path, monkeypatch, text, message):
    from computepool_client import JobFileError

    monkeypatch.chdir(tmp_path)
    Path("job.yaml").write_text(text)
    with pytest.raises(JobFileError) as error:
        jobfile.load_job_file("job.yaml")
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value)


def _attempt(state: str, verdict: str, *names: str) -> dict:
    files = [{"id": i, "name": n, "size": 1, "sha256": "0" * 64} for i, n in enumerate(names)]
    return {"state": state, "verdict": verdict, "artifacts": files}


def test_one_result_per_slice_and_a_shared_name_goes_under_its_slice(client_src_on_path):
    from computepool_client import outputs_of

    job = {
        "tasks": [
            {
                "index": 1,
                "replica": 0,
                "attempts": [_attempt("succeeded", "rejected", "wrong.txt")],
            },
            {"index": 1, "replica": 1, "attempts": [_attempt("succeeded", "agreed", "out.txt")]},
            {"index": 0, "replica": 0, "attempts": [_attempt("failed", "", "out.txt")]},
            {
                "index": 0,
                "replica": 1,
                "attempts": [_attempt("succeeded", "agreed", "out.txt", "log")],
            },
            {"index": 2, "replica": 0, "attempts": [_attempt("running", "")]},
        ]
    }
    placed = [(o.task_index, str(o.relative_path)) for o in outputs_of(job)]
    assert placed == [(0, "log"), (0, "slice-0/out.txt"), (1, "slice-1/out.txt")]


@pytest.mark.parametrize("name", ["../escape", "/etc/passwd", "a/b", "..", ""])
def test_an_output_name_that_is_a_path_is_refused(client_src_on_path, name):
    from computepool_client import HubUnavailable, outputs_of

    job = {"tasks": [{"index": 0, "replica": 0, "attempts": [_attempt("succeeded", "", name)]}]}
    with pytest.raises(HubUnavailable, match="not a file name"):
        outputs_of(job)
