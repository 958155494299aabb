"""job.yaml: a job as the fields of `POST /api/v1/jobs/`, with `inputs` naming local files."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import yaml

from computepool_client.errors import JobFileError
from computepool_client.models import JobSubmit

FIELDS = JobSubmit.__required_keys__ | JobSubmit.__optional_keys__


def load_job_file(path: str | Path) -> JobSubmit:
    """The job a file describes, ready for `jobs.submit(**job)`. Each input names a file,
    relative to the job file's folder, sent as that file's content. The hub checks every value;
    here only what it could not: that the file parses, that every key is a field a job takes
    (a misspelt `timeout` would otherwise be silently ignored) and that the inputs exist."""
    source = Path(path)
    try:
        data: Any = yaml.safe_load(source.read_text(encoding="utf-8"))
    except OSError as exc:
        raise JobFileError(f"{source}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise JobFileError(f"{source}: not valid YAML: {_first_line(exc)}") from exc
    if not isinstance(data, dict):
        raise JobFileError(f"{source}: a job file is a mapping of the job's fields")
    unknown = sorted(str(key) for key in data if key not in FIELDS)
    if unknown:
        raise JobFileError(
            f"{source}: unknown field(s) {', '.join(unknown)}; "
            f"a job takes {', '.join(sorted(FIELDS))}"
        )
    inputs = data.get("inputs", {})
    if not isinstance(inputs, dict):
        raise JobFileError(f"{source}: inputs maps a file name to a path")
    resolved: dict[str, Path] = {}
    for name, value in inputs.items():
        if not isinstance(value, str):
            raise JobFileError(f"{source}: inputs.{name} is a path, not {type(value).__name__}")
        local = (source.parent / value).resolve()
        if not local.is_file():
            raise JobFileError(f"{source}: inputs.{name}: no file at {local}")
        resolved[str(name)] = local
    if "inputs" in data:
        data["inputs"] = resolved
    return cast(JobSubmit, data)


def _first_line(exc: Exception) -> str:
    return " ".join(str(exc).split())
