"""Moving requests and tokens between hub processes, through Redis.

The client's stream and the agent's connections may land on different hub processes, so
nothing of a request lives in a process's memory:

| key                     | type   | what                                                        |
|-------------------------|--------|-------------------------------------------------------------|
| `cp:inf:q:<node>`       | list   | assignments waiting for the node's long-poll                |
| `cp:inf:a:<request>`    | hash   | the attempt in force: node, attempt number, key hash, cancel |
| `cp:inf:o:<req>:<att>`  | stream | what the attempt's agent pushed (bounded: MAXLEN)           |
| `cp:inf:busy:<node>`    | zset   | the node's slots in use, each with an expiry                |
| `cp:inf:n:<node>`       | string | the node's inference state from its last poll (expires)     |
| `cp:inf:unfit:<node>`   | hash   | model → what the node and model were when loading failed    |
| `cp:inf:w:<reader>`     | stream | wakes a process's reader when it has a new stream to follow |

Each attempt has a stream of its own, so an agent that lost the request (the hub moved it to
another node) pushes into a stream nobody reads: nothing it sends is relayed or paid for.
"""

import asyncio
import json
import logging
import time
import uuid
import weakref
from dataclasses import dataclass, field
from typing import Any

import redis
import redis.asyncio as aredis
from django.conf import settings

from people.keys import hash_key

log = logging.getLogger(__name__)

PREFIX = "cp:inf"
# A slot is held while the hub relays; a hub process that dies mid-request frees it at expiry.
SLOT_TTL_S = 120
_TAKE_SLOT = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('EXPIRE', KEYS[1], 3600)
return 1
"""


class RelayUnavailable(Exception):
    """No Redis is configured: the relay cannot run."""


def _url() -> str:
    if not settings.REDIS_URL:
        raise RelayUnavailable("the inference relay needs Redis (REDIS_URL)")
    return settings.REDIS_URL


# Per event loop: a pool cannot be shared between loops (and under WSGI, as in tests, each
# request runs a loop of its own).
_async_clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_sync_client: redis.Redis | None = None


def aclient() -> aredis.Redis:
    """This event loop's connection pool."""
    loop = asyncio.get_running_loop()
    client = _async_clients.get(loop)
    if client is None:
        # The read timeout must outlast the longest blocking read (an agent's long-poll).
        client = aredis.Redis.from_url(
            _url(), decode_responses=True, max_connections=2000, socket_timeout=120
        )
        _async_clients[loop] = client
    return client


def sclient() -> redis.Redis:
    global _sync_client
    if _sync_client is None:
        _sync_client = redis.Redis.from_url(_url(), decode_responses=True)
    return _sync_client


def _queue(node_id: int) -> str:
    return f"{PREFIX}:q:{node_id}"


def _attempt(request_id: int) -> str:
    return f"{PREFIX}:a:{request_id}"


def _out(request_id: int, attempt: int) -> str:
    return f"{PREFIX}:o:{request_id}:{attempt}"


def _busy(node_id: int) -> str:
    return f"{PREFIX}:busy:{node_id}"


def _state(node_id: int) -> str:
    return f"{PREFIX}:n:{node_id}"


def _unfit(node_id: int) -> str:
    return f"{PREFIX}:unfit:{node_id}"


# --- the agent's side --------------------------------------------------------------------------


async def node_state_put(node_id: int, state: dict[str, Any], *, ttl_s: int) -> None:
    await aclient().set(_state(node_id), json.dumps(state), ex=ttl_s)


async def unfit_put(node_id: int, model: str, marker: str) -> None:
    await aclient().hset(_unfit(node_id), model, marker)


async def assignments_next(node_id: int, *, wait_s: float, most: int) -> list[dict[str, Any]]:
    """Up to `most` assignments still in force for the node, waiting up to `wait_s` for the
    first (an agent with many free slots takes a burst in one poll)."""
    deadline = time.monotonic() + wait_s
    while (left := deadline - time.monotonic()) > 0:
        popped = await aclient().blpop([_queue(node_id)], timeout=max(left, 0.01))
        if popped is None:
            return []
        raw = [popped[1]]
        if most > 1:
            raw += await aclient().lpop(_queue(node_id), most - 1) or []
        found = [json.loads(item) for item in raw]
        pipe = aclient().pipeline(transaction=False)
        for assignment in found:
            pipe.hget(_attempt(assignment["request_id"]), "attempt")
        current = await pipe.execute()
        live = [a for a, now in zip(found, current, strict=True) if now == str(a["attempt"])]
        if live:
            return live
    return []


async def push(
    agent_key: str, pushes: list[tuple[int, int, list[dict[str, str]]]]
) -> list[tuple[int, bool] | None]:
    """Append each (request, attempt, entries) to its attempt's stream, in two round trips
    for all of them. Per push: None when the attempt is not this agent's (nothing written),
    otherwise its node and whether the hub asks the agent to stop."""
    key = hash_key(agent_key)
    pipe = aclient().pipeline(transaction=False)
    for request_id, _, _ in pushes:
        pipe.hgetall(_attempt(request_id))
    held = await pipe.execute()
    results: list[tuple[int, bool] | None] = []
    pipe = aclient().pipeline(transaction=False)
    for (request_id, attempt, entries), fields in zip(pushes, held, strict=True):
        if fields.get("attempt") != str(attempt) or fields.get("key") != key:
            results.append(None)
            continue
        results.append((int(fields["node"]), fields.get("cancel") == "1"))
        for entry in entries:
            pipe.xadd(_out(request_id, attempt), entry, maxlen=settings.INFERENCE_STREAM_MAXLEN)
        pipe.expire(_out(request_id, attempt), 3600)
    await pipe.execute()
    return results


# --- the client's side -------------------------------------------------------------------------


def node_states(node_ids: list[int]) -> dict[int, dict[str, Any]]:
    if not node_ids:
        return {}
    values = sclient().mget([_state(n) for n in node_ids])
    return {n: json.loads(v) for n, v in zip(node_ids, values, strict=True) if v}


def unfit_of(node_ids: list[int]) -> dict[int, dict[str, str]]:
    pipe = sclient().pipeline(transaction=False)
    for node_id in node_ids:
        pipe.hgetall(_unfit(node_id))
    return dict(zip(node_ids, pipe.execute(), strict=True))


async def slot_take(node_id: int, slots: int, member: str) -> bool:
    now = time.time()
    taken = await aclient().eval(
        _TAKE_SLOT, 1, _busy(node_id), now, now + SLOT_TTL_S, member, slots
    )
    return bool(taken)


async def slot_keep(node_id: int, member: str) -> None:
    await aclient().zadd(_busy(node_id), {member: time.time() + SLOT_TTL_S}, xx=True)


async def slot_give(node_id: int, member: str) -> None:
    await aclient().zrem(_busy(node_id), member)


async def assign(
    request_id: int, attempt: int, node_id: int, key: str, body: dict[str, Any]
) -> None:
    """Make `attempt` the one in force (fencing off earlier ones) and queue it for the node."""
    pipe = aclient().pipeline(transaction=True)
    pipe.delete(_attempt(request_id))
    pipe.hset(
        _attempt(request_id),
        mapping={"attempt": attempt, "node": node_id, "key": key, "cancel": 0},
    )
    pipe.expire(_attempt(request_id), 3600)
    pipe.rpush(_queue(node_id), json.dumps({**body, "request_id": request_id, "attempt": attempt}))
    pipe.expire(_queue(node_id), 600)
    await pipe.execute()


@dataclass
class _Follow:
    """One attempt's stream, as the reader has read it."""

    cursor: str
    entries: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    ready: asyncio.Event = field(default_factory=asyncio.Event)


class _Reader:
    """Every stream this event loop relays, read by one blocking XREAD over all of them, whose
    entries go to each stream's follower. One read per stream per push (hundreds of blocked
    connections, each woken and parsed on its own) kept a process's loop from keeping up with
    hundreds of streams. A stream newly followed wakes the XREAD in force through the reader's
    own wake stream, so that the next one includes it."""

    BLOCK_MS = 1000
    COUNT = 500

    def __init__(self) -> None:
        self.follows: dict[str, _Follow] = {}
        self.wake_key = f"{PREFIX}:w:{uuid.uuid4().hex}"
        self.wake_cursor = "0"
        self.task: asyncio.Task | None = None

    async def follow(self, key: str, after: str) -> _Follow:
        follow = self.follows.get(key)
        if follow is None:
            follow = self.follows[key] = _Follow(after)
            if self.task is not None and not self.task.done():
                pipe = aclient().pipeline(transaction=False)
                pipe.xadd(self.wake_key, {"w": "1"}, maxlen=10, approximate=True)
                pipe.expire(self.wake_key, 60)
                await pipe.execute()
        if self.task is None or self.task.done():  # none yet, or it ended (Redis failed it)
            self.task = asyncio.ensure_future(self._run())
        return follow

    def unfollow(self, keys: list[str]) -> None:
        for key in keys:
            self.follows.pop(key, None)

    async def _run(self) -> None:
        while self.follows:  # ends with the last stream: a loop's reader lives while needed
            streams = {self.wake_key: self.wake_cursor}
            streams.update((key, follow.cursor) for key, follow in self.follows.items())
            try:
                answer = await aclient().xread(streams, block=self.BLOCK_MS, count=self.COUNT)
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                # Its streams wait for it: a reader that ended here would leave them silent.
                log.warning("relay reader: %s; reading again", exc)
                await asyncio.sleep(0.1)
                continue
            for key, entries in answer or []:
                if key == self.wake_key:
                    self.wake_cursor = entries[-1][0]
                elif (follow := self.follows.get(key)) is not None:
                    follow.cursor = entries[-1][0]
                    follow.entries += entries
                    follow.ready.set()


_readers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _reader() -> _Reader:
    loop = asyncio.get_running_loop()
    reader = _readers.get(loop)
    if reader is None:
        reader = _readers[loop] = _Reader()
    return reader


async def read(
    request_id: int, attempt: int, after: str, *, block_s: float
) -> list[tuple[str, dict[str, str]]]:
    """The attempt's entries after id `after` (where this process starts following it; after
    that, wherever the last read ended), waiting up to `block_s` for the first."""
    follow = await _reader().follow(_out(request_id, attempt), after)
    if not follow.entries:
        try:
            async with asyncio.timeout(block_s):
                await follow.ready.wait()
        except TimeoutError:
            return []
    entries, follow.entries = follow.entries, []
    follow.ready.clear()
    return entries


async def fence(request_id: int) -> None:
    """No attempt is in force: whatever an agent still pushes is refused."""
    await aclient().hset(_attempt(request_id), "attempt", "0")


async def cancel(request_id: int) -> None:
    """Ask the agent in force to stop (it learns it on its next push)."""
    await aclient().hset(_attempt(request_id), "cancel", "1")


async def forget(request_id: int, attempts: int) -> None:
    outs = [_out(request_id, n) for n in range(1, attempts + 1)]
    _reader().unfollow(outs)
    await aclient().delete(_attempt(request_id), *outs)
