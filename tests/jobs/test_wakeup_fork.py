"""A fork copies a process's locks as they are, held ones included, but none of its threads.

The hub's waker has a listener thread that takes the waker's condition whenever a notification
arrives. A process forked at that moment (a prefork server's worker, a proof's claimer) would
hold a copy of that lock that nothing in it can release, and hang at its first wake-up."""

import multiprocessing
import threading

from jobs.wakeup import waker


def _wake_and_wait() -> None:
    waker.wake_local()
    waker.wait(waker.mark(0)._replace(generation=-1), 0, timeout=1)


def test_a_child_forked_while_the_waker_is_held_can_still_wake_and_wait():
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        # What the listener does for each notification, held open across the fork.
        with waker._cond:
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert held.wait(5)
    try:
        child = multiprocessing.get_context("fork").Process(target=_wake_and_wait)
        child.start()
        child.join(10)
        hung = child.is_alive()
        if hung:
            child.kill()
            child.join()
    finally:
        release.set()
        holder.join(5)
    assert not hung, "the child hung on a lock that its parent's thread held at the fork"
    assert child.exitcode == 0
    # The parent's own waker still works.
    _wake_and_wait()
