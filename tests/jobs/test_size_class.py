"""The queue's size classes: a small node's claim reads only the classes it fits, and takes
exactly the task the whole queue's order would give it."""

import random
import threading
from contextlib import contextmanager
from dataclasses import replace

import pytest
from django.db import connection, transaction
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from core.sql import statement
from jobs import claim as claim_module
from jobs.billing import NodePrice
from jobs.claim import (
    BUCKETED_CLAIM,
    QUEUE_CLAIM,
    bucketed_params,
    claim_events_params,
    claim_statement,
    task_claim,
)
from jobs.models import Task
from jobs.node_profile import NodeProfile, profile_for
from jobs.size_class import BUCKETED_MAX, GPU_FLAG, node_size_classes, task_size_class
from nodes.models import Node
from tests.jobs.conftest import CREDITS, fund, online_node, submit_job
from tests.nodes.conftest import BASE

cores = st.integers(min_value=0, max_value=4096)
ram = st.integers(min_value=0, max_value=1 << 26)


gpus = st.integers(min_value=0, max_value=8)


@given(task=st.tuples(cores, ram, gpus), node=st.tuples(cores, ram, gpus))
def test_a_node_reads_every_class_holding_work_it_fits(task, node):
    classes = node_size_classes(*node)
    if classes is None:
        return  # a big node reads the whole queue
    assert len(classes) <= BUCKETED_MAX * (2 if node[2] else 1)
    if all(need <= has for need, has in zip(task, node, strict=True)):
        assert task_size_class(*task) in classes


@given(task=st.tuples(cores, ram, gpus.filter(bool)), node=st.tuples(cores, ram))
def test_a_node_without_a_gpu_never_reads_gpu_work(task, node):
    assert task_size_class(*task) not in (node_size_classes(*node, 0) or [])


def test_the_classes_round_each_dimension_up_to_a_power_of_two():
    assert task_size_class(1, 512, 0) == 0
    assert task_size_class(2, 512, 0) == 32
    assert task_size_class(3, 512, 0) == task_size_class(4, 512, 0) == 64
    assert task_size_class(1, 513, 0) == task_size_class(1, 1024, 0) == 1
    assert task_size_class(1, 1025, 0) == 2
    assert task_size_class(1, 512, 1) == task_size_class(1, 512, 4) == GPU_FLAG
    assert node_size_classes(2, 2048, 0) == [0, 1, 2, 32, 33, 34]
    assert node_size_classes(2, 2048, 1) == [
        0,
        1,
        2,
        32,
        33,
        34,
        *(GPU_FLAG + k for k in [0, 1, 2, 32, 33, 34]),
    ]
    assert node_size_classes(32, 65536, 0) is None  # 6 × 8 classes: the queue's own index


def _submit(
    user_id: int,
    *,
    cores: int,
    ram_mb: int,
    priority: int = 0,
    vram: int = 0,
    region: str = "",
    slices: int = 2,
):
    requirements = {"cpu_cores": cores, "ram_mb": ram_mb, "region": region}
    if vram:
        requirements |= {"min_vram_mb": vram, "gpu_count": 1}
    return submit_job(user_id, slices, priority=priority, requirements=requirements)


def _small(
    node_id: int, cores: int, ram_mb: int, trusted: bool, gpu: bool = False, version: int = 1
) -> NodeProfile:
    """A small node's profile: its hardware and trust as given, its row's `node_id` and
    `version`, and a price from a market that has not priced it (no spot row)."""
    return NodeProfile(
        node_id=node_id,
        version=version,
        operator_id=1,
        can_claim=True,
        region="IN",
        tier="rtx-3060" if gpu else "cpu",
        vram_mb=12_288 if gpu else 0,
        compute_capability=86 if gpu else 0,
        cpu_cores=cores,
        ram_mb=ram_mb,
        disk_mb=100_000,
        gpu_count=1 if gpu else 0,
        price=NodePrice(per_s=1, spot_region="IN", spot_tier="cpu", spot_seen=0),
        trusted=trusted,
        fit=0.8,
    )


def _pick(name: str, params: dict, profile: NodeProfile) -> int | None:
    """The task the claim statement `name` takes with `params`, the claim rolled back."""
    lease = {"lease_token": "t", "lease_expires_at": params["now"], "lazy": False}
    events = claim_events_params(profile, params["now"])
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(statement("jobs", name), params | lease | events)
            row = cursor.fetchone()
        transaction.set_rollback(True)
    assert row is not None, "the statement found the node moved since its profile was read"
    return row[0]


class _Held:
    """A transaction on a connection of its own, kept open (its locks held) until released."""

    def __init__(self, work):
        self.result, self.errors = [], []
        self._ready, self._finish = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._run, args=(work,))

    def _run(self, work) -> None:
        try:
            with transaction.atomic():
                self.result.append(work())
                self._ready.set()
                assert self._finish.wait(30)
        except BaseException as exc:  # surfaced by held_open
            self.errors.append(exc)
            self._ready.set()
        finally:
            connection.close()

    def release(self) -> None:
        self._finish.set()
        self._thread.join(30)


@contextmanager
def held_open(work):
    """Run `work()` in another transaction and keep it open for the block (or until release)."""
    holder = _Held(work)
    holder._thread.start()
    try:
        assert holder._ready.wait(30)
        assert not holder.errors, holder.errors
        yield holder
    finally:
        holder.release()
    assert not holder.errors, holder.errors


def _locking(sql: str, params: list):
    def work() -> None:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)

    return work


@pytest.mark.postgres
def test_the_database_computes_each_tasks_class(alice):
    fund(alice, 10_000_000 * CREDITS)
    for cores_, ram_mb in [(1, 16), (1, 512), (1, 513), (2, 2048), (3, 3000), (64, 4_194_304)]:
        _submit(alice.pk, cores=cores_, ram_mb=ram_mb)
        _submit(alice.pk, cores=cores_, ram_mb=ram_mb, vram=8192)
    # Two GPUs; and a GPU asked for without VRAM (it sorts among the CPU work, in GPU classes).
    for gpus_, vram in [(2, 8192), (1, 0)]:
        requirements = {"cpu_cores": 2, "ram_mb": 2048, "gpu_count": gpus_, "min_vram_mb": vram}
        submit_job(alice.pk, 1, requirements=requirements)
    tasks = list(Task.objects.all())
    assert {(t.gpu_count, t.min_vram_mb > 0) for t in tasks} >= {
        (0, False),
        (1, True),
        (2, True),
        (1, False),
    }
    for task in tasks:
        assert task.size_class == task_size_class(task.cpu_cores, task.ram_mb, task.gpu_count)


@pytest.mark.postgres
def test_an_inserted_task_gets_its_class_whatever_its_writer_gave(alice):
    fund(alice, 10_000_000 * CREDITS)
    _submit(alice.pk, cores=3, ram_mb=3000, slices=1)
    task = Task.objects.get()
    task.pk, task.index, task.size_class = None, 1, 999  # a writer with a wrong class
    task.save()
    assert Task.objects.get(pk=task.pk).size_class == task_size_class(3, 3000, 0) == 67


@pytest.mark.postgres
def test_the_class_is_set_by_an_insert_trigger_alone(db):
    # Set once: the claim's, completion's and reaper's updates of a task do not compute it again
    # (its requirements never change after submission), and no generated column does either.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tgtype, tgname FROM pg_trigger WHERE tgrelid = 'jobs_task'::regclass "
            "AND NOT tgisinternal"
        )
        triggers = cursor.fetchall()
        cursor.execute(
            "SELECT attgenerated FROM pg_attribute WHERE attrelid = 'jobs_task'::regclass "
            "AND attname = 'size_class'"
        )
        generated = cursor.fetchone()[0]
    # One row trigger, BEFORE INSERT only (tgtype bits: 1 row, 2 before, 4 insert, 16 update).
    assert triggers == [(1 | 2 | 4, "jobs_task_size_class")]
    assert generated == ""


@pytest.mark.postgres
def test_a_small_nodes_pick_is_the_queues_own_order(alice, bob):
    # A queue whose head is mostly work too big for the small nodes, in every order key.
    rng = random.Random(7)
    fund(alice, 100_000_000 * CREDITS)
    for _ in range(80):
        _submit(
            alice.pk,
            cores=rng.choice([1, 2, 3, 4, 6, 8, 16]),
            ram_mb=rng.choice([256, 512, 1000, 2048, 3000, 4096, 8192]),
            priority=rng.choice([-1, 0, 0, 1, 2]),
            vram=rng.choice([0, 0, 0, 8192]),
        )
    now = timezone.now()
    # One node's row, its trust set for each profile: the picks take each profile's hardware
    # from the parameters, and check the row only for what the profile read of it.
    node, _ = online_node(bob)
    passed_over = found = 0
    for i in range(120):
        trusted = rng.random() < 0.5
        Node.objects.filter(pk=node.pk).update(reliability=0.9 if trusted else 0.1)
        profile = _small(
            node_id=node.pk,
            version=node.event_version,
            cores=rng.choice([1, 2, 3, 4]),
            ram_mb=rng.choice([512, 1024, 2048, 3000, 4096]),
            trusted=trusted,
            gpu=i % 3 == 0,  # reads the GPU classes too
        )
        assert profile.size_classes is not None
        params = bucketed_params(profile, now)
        expected = _pick(QUEUE_CLAIM, params, profile)
        assert _pick(BUCKETED_CLAIM, params, profile) == expected
        found += expected is not None
        head = _pick(QUEUE_CLAIM, params | {"cores": 1024, "ram": 1 << 30}, profile)
        passed_over += expected is not None and head != expected
    # The comparison meant something: most nodes found work, and most of those had to pass
    # over bigger work ahead of it.
    assert found > 80 and passed_over > 40


@pytest.mark.postgres
def test_a_small_node_claims_past_a_head_of_bigger_work(alice, bob):
    fund(alice, 100_000_000 * CREDITS)
    for _ in range(20):
        _submit(alice.pk, cores=8, ram_mb=16_000)
    _submit(alice.pk, cores=2, ram_mb=2048)
    cpu = {**BASE["cpu"], "physical_cores": 2, "logical_cores": 2}
    node, _ = online_node(bob, name="small", gpus=[], cpu=cpu, ram_mb=2048)
    profile = profile_for(node)
    sql, _, _ = claim_statement(profile, timezone.now())
    assert "size_class" in sql  # the bucketed pick
    lease = task_claim(profile=profile)
    assert lease is not None
    task = Task.objects.get(pk=lease.task_id)
    assert (task.cpu_cores, task.ram_mb, task.state) == (2, 2048, "leased")
    # The rest of the queue is as it was.
    assert Task.objects.filter(state="leased").count() == 1
    big = replace(profile, cpu_cores=16, ram_mb=64_000)
    assert "size_class" not in claim_statement(big, timezone.now())[0]


@pytest.mark.postgres
def test_the_bucketed_pick_reads_the_class_index(alice):
    fund(alice, 100_000_000 * CREDITS)
    for _ in range(5):
        _submit(alice.pk, cores=8, ram_mb=16_000)
    _submit(alice.pk, cores=1, ram_mb=512)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobs_task")
        profile = _small(node_id=1, cores=2, ram_mb=2048, trusted=False)
        params = bucketed_params(profile, timezone.now())
        cursor.execute("SET LOCAL enable_seqscan = off")  # a six-row table: force the choice
        lease = {"lease_token": "t", "lease_expires_at": timezone.now(), "lazy": False}
        events = claim_events_params(profile, timezone.now())
        cursor.execute("EXPLAIN " + statement("jobs", BUCKETED_CLAIM), params | lease | events)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "task_claim_bucket" in plan


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_small_nodes_claim_locks_only_the_task_it_takes(alice, bob):
    # S1 fits both tasks and takes the older one; S2 may only run the other. While S1's claim
    # is still open, S2 must get that other task: a pick that also locked the heads it did not
    # take would hold it, and S2 would hear that nothing is queued.
    fund(alice, 100_000_000 * CREDITS)
    older = _submit(alice.pk, cores=1, ram_mb=512, region="US", slices=1)
    other = _submit(alice.pk, cores=2, ram_mb=2048, slices=1)
    cpu = {**BASE["cpu"], "logical_cores": 2}
    s1 = profile_for(online_node(bob, name="s1", region="US", gpus=[], cpu=cpu, ram_mb=2048)[0])
    s2 = profile_for(online_node(bob, name="s2", region="IN", gpus=[], cpu=cpu, ram_mb=2048)[0])
    assert s1.size_classes is not None
    with held_open(lambda: task_claim(profile=s1)) as first:
        assert first.result[0] is not None and first.result[0].job_id == older.pk
        second = task_claim(profile=s2)
    assert second is not None and second.job_id == other.pk


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_held_head_gives_way_to_the_next_task_in_the_queues_order(alice, bob):
    # H (priority 3) is held by a claim in flight; after it come M (priority 2, another class)
    # and L (priority -5, H's class). The node must get M, as the queue's own pick would: not
    # the next task of H's class.
    fund(alice, 100_000_000 * CREDITS)
    high = _submit(alice.pk, cores=1, ram_mb=512, priority=3, slices=1)
    low = _submit(alice.pk, cores=1, ram_mb=512, priority=-5, slices=1)
    middle = _submit(alice.pk, cores=2, ram_mb=2048, priority=2, slices=1)
    cpu = {**BASE["cpu"], "logical_cores": 2}
    node = online_node(bob, name="small", gpus=[], cpu=cpu, ram_mb=2048)[0]
    profile = replace(profile_for(node), trusted=True)
    head = _locking("SELECT id FROM jobs_task WHERE job_id = %s FOR UPDATE", [high.pk])
    with held_open(head):
        lease = task_claim(profile=profile)
    assert lease is not None and lease.job_id == middle.pk, (lease, low.pk)


@pytest.mark.postgres
def test_a_cancel_wakes_the_claims_that_passed_over_its_tasks(
    alice, django_capture_on_commit_callbacks, monkeypatch
):
    from jobs import cancellation

    fund(alice, 100_000_000 * CREDITS)
    job = _submit(alice.pk, cores=1, ram_mb=512, slices=3)
    woken = []
    monkeypatch.setattr(cancellation, "notify_work", lambda: woken.append(True))
    with django_capture_on_commit_callbacks(execute=True):
        cancellation.job_cancel(job=job, actor="test")
    assert woken == [True]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_claim_that_finds_every_candidate_held_looks_again(alice, bob, monkeypatch):
    # A herd of claims woken together can hold (or take) every candidate of a small node's
    # classes at the moment it claims: it must look again, not send the node to wait beside
    # queued work. Here another transaction holds the class's first CANDIDATES tasks.
    fund(alice, 100_000_000 * CREDITS)
    job = _submit(alice.pk, cores=1, ram_mb=512, slices=claim_module.CANDIDATES + 1)
    cpu = {**BASE["cpu"], "logical_cores": 1}
    node = profile_for(online_node(bob, name="tiny", gpus=[], cpu=cpu, ram_mb=512)[0])
    assert node.size_classes == [0]
    candidates = _locking(
        "SELECT id FROM jobs_task WHERE job_id = %s ORDER BY id LIMIT %s FOR UPDATE",
        [job.pk, claim_module.CANDIDATES],
    )
    pauses = []
    with held_open(candidates) as herd:

        def pause(seconds: float) -> None:
            pauses.append(seconds)
            herd.release()  # the herd's claims end

        monkeypatch.setattr(claim_module, "_pause", pause)
        lease = task_claim(profile=node)
    assert pauses == [claim_module._HELD_PAUSES_S[0]]
    assert lease is not None and lease.job_id == job.pk


@pytest.mark.postgres
def test_a_node_with_nothing_queued_for_it_does_not_wait(alice, bob, monkeypatch):
    fund(alice, 100_000_000 * CREDITS)
    _submit(alice.pk, cores=8, ram_mb=16_000)  # outside its classes
    _submit(alice.pk, cores=1, ram_mb=512, region="US")  # in its class, another region
    cpu = {**BASE["cpu"], "logical_cores": 2}
    small = profile_for(online_node(bob, name="small", gpus=[], cpu=cpu, ram_mb=2048)[0])
    monkeypatch.setattr(claim_module, "_pause", lambda seconds: pytest.fail("paused"))
    assert task_claim(profile=small) is None
