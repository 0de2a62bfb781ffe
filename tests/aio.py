"""asyncio.run that also works where an event loop already runs in this thread (e.g. left by
Playwright's sync API): the coroutine then runs on a fresh loop in a worker thread."""

import asyncio
import concurrent.futures


def run_async(coro):
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()
