"""asyncio for cortex.Request: `async for piece in req` and `await req`.

Request.__aiter__ returns stream(req) and Request.__await__ returns
result(req).__await__(); you rarely call these yourself.

How it waits without a thread per request: the request gets a *waker*
(Request._add_waker), a function the scheduler's thread calls, holding the
GIL, after every token and once at the end. The waker only schedules
`event.set` on the event loop with loop.call_soon_threadsafe, so the loop
thread wakes up and reads what arrived with the non-blocking Request._poll()
(or done()). Nothing here blocks the loop; the scheduler's thread never
waits for it.

Cancellation: if the task awaiting a request (or iterating it) is
cancelled, the request is cancelled too (its KV blocks are freed at the
scheduler's next step), and asyncio.CancelledError propagates as usual.
Leaving `async for` early (break) does not cancel it: call req.cancel().
"""
import asyncio

__all__ = ["stream", "result"]


def _waker(loop, event):
    """A function for the scheduler's thread: set `event` on `loop`'s thread."""

    def wake():
        try:
            loop.call_soon_threadsafe(event.set)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass

    return wake


async def stream(req):
    """Yield the request's text pieces as tokens arrive (the async form of `for piece in req`).

    Pieces hold back an incomplete UTF-8 character until it completes; ''.join of
    them equals req.result()["text"]. At the end it raises what iteration raises
    (RuntimeError from a callback's exception), else it simply stops.
    """
    loop = asyncio.get_running_loop()
    event = asyncio.Event()
    wake = _waker(loop, event)
    req._add_waker(wake)
    try:
        while True:
            # clear before looking: a wake after the look sets it again, one before is already seen
            event.clear()
            try:
                piece = req._poll()
            except StopIteration:
                return
            if piece is None:
                await event.wait()
            else:
                yield piece
    except asyncio.CancelledError:
        req.cancel()
        raise
    finally:
        req._remove_waker(wake)


async def result(req, timeout=None):
    """Wait for the request to end and return req.result() (the async form of req.result()).

    timeout: seconds, or None to wait as long as it takes; TimeoutError when it passes
    (the request goes on). A callback's exception is raised as result() raises it.
    """
    loop = asyncio.get_running_loop()
    event = asyncio.Event()
    wake = _waker(loop, event)
    req._add_waker(wake)
    try:
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            event.clear()
            if req.done():
                break
            if deadline is None:
                await event.wait()
            else:
                left = deadline - loop.time()
                if left <= 0:
                    raise TimeoutError(f"request {req.id} did not end within {timeout:g} s")
                try:
                    await asyncio.wait_for(event.wait(), left)
                except asyncio.TimeoutError:
                    pass
    except asyncio.CancelledError:
        req.cancel()
        raise
    finally:
        req._remove_waker(wake)
    return req.result()
