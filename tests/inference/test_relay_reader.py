"""One reader per event loop follows every stream the process relays (inference.relay._Reader):
each follower gets its own stream's entries, in order, however many streams one XREAD covers,
and a stream followed while that XREAD is blocked is read too."""

import asyncio
import time

import pytest
import redis
from asgiref.sync import async_to_sync
from django.conf import settings

from inference import relay


@pytest.fixture
def redis_keys():
    if not settings.REDIS_URL:
        pytest.fail("the relay tests need Redis (REDIS_URL); scripts/test.sh provides one")
    yield
    client = _client()
    for key in client.scan_iter(f"{relay.PREFIX}:*"):
        client.delete(key)


def _client() -> redis.Redis:
    # The Redis the reader reads now (this test's settings), not the process's cached client,
    # which an earlier test may have made for another database.
    return redis.Redis.from_url(relay._url(), decode_responses=True)


def _push(request_id: int, *pieces: str) -> None:
    client = _client()
    for piece in pieces:
        client.xadd(relay._out(request_id, 1), {"k": "t", "v": f'["{piece}"]'})


async def _read_all(request_id: int, count: int) -> list[str]:
    got: list[str] = []
    deadline = time.monotonic() + 30
    while len(got) < count:
        assert time.monotonic() < deadline, f"stream {request_id}: {got} after 30 s"
        entries = await relay.read(request_id, 1, "0", block_s=5)
        got += [entry["v"] for _, entry in entries]
    return got


async def _forget(*request_ids: int) -> None:
    """Forget the streams and wait for the reader to end on its own (it reads while it follows
    a stream), rather than leave it to be cancelled in a blocked read when the loop closes."""
    reader = relay._reader()
    for request_id in request_ids:
        await relay.forget(request_id, 1)
    await asyncio.wait_for(reader.task, 10)
    assert reader.follows == {}


def test_it_gives_each_stream_its_own_entries_in_order(redis_keys):
    async def run() -> list[list[str]]:
        for request_id in range(1, 51):
            _push(request_id, f"a{request_id}", f"b{request_id}")
        got = await asyncio.gather(*(_read_all(request_id, 2) for request_id in range(1, 51)))
        await _forget(*range(1, 51))
        return got

    answers = async_to_sync(run)()
    assert answers == [[f'["a{n}"]', f'["b{n}"]'] for n in range(1, 51)]


def test_it_reads_a_stream_followed_while_it_waits_on_others(redis_keys):
    async def run() -> tuple[list[str], list[str]]:
        early = asyncio.ensure_future(_read_all(1, 1))
        await asyncio.sleep(0)  # the reader now blocks on stream 1 alone
        late = asyncio.ensure_future(_read_all(2, 2))
        await asyncio.sleep(0)
        _push(2, "x", "y")
        second = await late
        _push(1, "z")
        first = await early
        await _forget(1, 2)
        return first, second

    first, second = async_to_sync(run)()
    assert (first, second) == (['["z"]'], ['["x"]', '["y"]'])


def test_it_stops_reading_a_stream_once_forgotten(redis_keys):
    async def run() -> tuple[bool, bool]:
        _push(7, "a")
        await _read_all(7, 1)
        reader = relay._reader()
        following = relay._out(7, 1) in reader.follows
        await _forget(7)
        return following, relay._out(7, 1) in reader.follows

    assert async_to_sync(run)() == (True, False)
