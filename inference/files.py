"""A catalog model's file, served to agents in byte ranges so a broken download resumes.

One range per request (`Range: bytes=START-` or `bytes=START-END`), which is what a resuming
client sends; anything else is answered whole (no Range) or 416 (a range outside the file).
"""

import re
from collections.abc import Iterator
from typing import IO

from django.http import HttpResponse, StreamingHttpResponse

from inference.catalog import served_path
from inference.models import InferenceModel

_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")
_CHUNK = 1024 * 1024


def _open(model: InferenceModel) -> IO[bytes]:
    if model.file:
        return model.file.storage.open(model.file.name, "rb")
    return served_path(model.path).open("rb")


def _chunks(stream: IO[bytes], length: int) -> Iterator[bytes]:
    try:
        while length > 0:
            chunk = stream.read(min(_CHUNK, length))
            if not chunk:
                return
            length -= len(chunk)
            yield chunk
    finally:
        stream.close()


def model_file_response(model: InferenceModel, range_header: str | None) -> HttpResponse:
    size = model.size_bytes
    start, end, status = 0, size - 1, 200
    if range_header:
        match = _RANGE.match(range_header.strip())
        if match is None:
            return _unsatisfiable(size)
        start = int(match[1])
        end = min(int(match[2]), size - 1) if match[2] else size - 1
        if start >= size or end < start:
            return _unsatisfiable(size)
        status = 206
    stream = _open(model)
    stream.seek(start)
    response = StreamingHttpResponse(
        _chunks(stream, end - start + 1), status=status, content_type="application/octet-stream"
    )
    response["Content-Length"] = str(end - start + 1)
    response["Accept-Ranges"] = "bytes"
    # The agent checks the whole file against this before it loads it.
    response["X-Model-Sha256"] = model.sha256
    response["ETag"] = f'"{model.sha256}"'
    if status == 206:
        response["Content-Range"] = f"bytes {start}-{end}/{size}"
    return response


def _unsatisfiable(size: int) -> HttpResponse:
    response = HttpResponse(status=416)
    response["Content-Range"] = f"bytes */{size}"
    return response
