"""One thread per process that runs jobs in the order they are handed over: the DDP hook's
all-reduces and the torch.distributed backend's plain collectives and completions. The plain
collectives (ringtrain.allreduce on the job's communicator) are matched across ranks by their
order, so they must run one at a time in the callers' order; the binding releases the GIL
while they run, so the callers go on meanwhile."""
import queue
import threading

_lock = threading.Lock()
_jobs = None
_thread = None


def _run(jobs):
    while True:
        job = jobs.get()
        if job is None:
            return
        job()  # completes its own future, errors included


def submit(job):
    """Runs job() on the thread, after every job submitted before it."""
    global _jobs, _thread
    with _lock:
        if _thread is None:
            _jobs = queue.SimpleQueue()
            _thread = threading.Thread(target=_run, args=(_jobs,), name="ringtrain-worker",
                                       daemon=True)
            _thread.start()
        _jobs.put(job)


def stop():
    """Ends the thread once the jobs before have run (shutdown())."""
    global _jobs, _thread
    with _lock:
        thread, jobs, _thread, _jobs = _thread, _jobs, None, None
    if thread is not None:
        jobs.put(None)
        thread.join()
