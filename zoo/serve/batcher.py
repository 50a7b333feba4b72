"""Dynamic batching: the sentences of requests that arrive together,
decoded in one engine call.

The first waiting request opens a batch; the batch takes the waiting
requests of the same search settings, in arrival order, once `max_wait`
seconds have passed since the first arrived or as soon as they hold
`max_batch` sentences. The engine runs in one worker thread, so the event
loop goes on reading requests while it decodes, and the requests that
arrive meanwhile form the next batch.
"""

import asyncio
import concurrent.futures
import logging
from dataclasses import dataclass
from dataclasses import field

logger = logging.getLogger(__name__)


class QueueFull(Exception):
    """More sentences would wait than the queue limit allows."""


@dataclass
class _Job:
    sentences: list
    settings: tuple
    future: asyncio.Future
    arrived: float = field(default=0.0)


class DynamicBatcher:
    """Batches `submit`ted requests into calls `decode(sentences, settings)`
    (run in a worker thread), which returns one result per sentence.

    Args:
        decode: the engine call.
        max_batch: the most sentences one call gets (a larger request is
            decoded alone).
        max_wait: seconds the first request of a batch waits for others.
        max_queue: the most sentences waiting; `submit` raises `QueueFull`
            beyond it.
    """

    def __init__(self, decode, max_batch, max_wait, max_queue):
        self.decode = decode
        self.max_batch = max_batch
        self.max_wait = max_wait
        self.max_queue = max_queue
        self._jobs = []
        self._waiting = 0  # sentences in self._jobs
        self._arrived = asyncio.Event()
        self._closing = False
        self._worker = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="zoo-serve-engine"
        )
        self._loop_task = None

    def start(self):
        """Starts batching, on the running event loop."""
        self._loop_task = asyncio.get_running_loop().create_task(self._batches())

    async def close(self):
        """Decodes what waits, then stops (the server's shutdown)."""
        self._closing = True
        self._arrived.set()
        if self._loop_task is not None:
            await self._loop_task
        self._worker.shutdown(wait=True)

    async def submit(self, sentences, settings):
        """The results of `sentences`, decoded with `settings` in some batch."""
        if self._waiting + len(sentences) > self.max_queue:
            raise QueueFull(
                f"the server is busy: {self._waiting} sentences or images wait to be decoded, "
                f"and the queue holds at most {self.max_queue} (--max-queue); retry later"
            )
        loop = asyncio.get_running_loop()
        job = _Job(list(sentences), settings, loop.create_future(), loop.time())
        self._jobs.append(job)
        self._waiting += len(job.sentences)
        self._arrived.set()
        return await job.future

    async def _batches(self):
        while self._jobs or not self._closing:
            if not self._jobs:
                self._arrived.clear()
                await self._arrived.wait()
                continue
            await self._fill(self._jobs[0])
            await self._run(self._take(self._jobs[0].settings))

    async def _fill(self, first):
        """Waits until the batch of `first` is full or its wait is over."""
        loop = asyncio.get_running_loop()
        while not self._closing and self._same_kind(first.settings) < self.max_batch:
            remaining = first.arrived + self.max_wait - loop.time()
            if remaining <= 0:
                return
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except asyncio.TimeoutError:
                return

    def _same_kind(self, settings):
        return sum(len(job.sentences) for job in self._jobs if job.settings == settings)

    def _take(self, settings):
        """Removes and returns the waiting jobs of `settings` that fit in a batch."""
        batch, size = [], 0
        for job in list(self._jobs):
            if job.settings != settings or (batch and size + len(job.sentences) > self.max_batch):
                continue
            self._jobs.remove(job)
            self._waiting -= len(job.sentences)
            if job.future.cancelled():  # its client left
                continue
            batch.append(job)
            size += len(job.sentences)
        return batch

    async def _run(self, batch):
        """Decodes `batch` in the worker thread and answers each job."""
        if not batch:
            return
        sentences = [sentence for job in batch for sentence in job.sentences]
        loop = asyncio.get_running_loop()
        try:
            results = await loop.run_in_executor(
                self._worker, self.decode, sentences, batch[0].settings
            )
        except Exception as error:  # each request of the batch gets the failure
            logger.exception("the engine failed on a batch of %d sentences", len(sentences))
            for job in batch:
                if not job.future.done():
                    job.future.set_exception(error)
            return
        start = 0
        for job in batch:
            end = start + len(job.sentences)
            if not job.future.done():
                job.future.set_result(results[start:end])
            start = end
