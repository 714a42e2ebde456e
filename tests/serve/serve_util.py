"""What the serve suites (test_serve.py, test_libre_client.py) share."""
import threading
import time
import traceback


def run_clients(n, client):
    """client(k) for k in range(n) at once, each on its own thread; then fails naming every
    client that raised, and what."""
    errors = []

    def run(k):
        try:
            client(k)
        except Exception as e:  # noqa: BLE001
            errors.append(f"client {k}: {e!r}")

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def run_tests(tests, only=None):
    """Runs each (fn, args) of tests (only: just the one of that name), printing "ok" and its
    time or "FAIL" and the traceback; returns the names of those that failed."""
    failures = []
    for fn, args in tests:
        if only and fn.__name__ != only:
            continue
        t = time.time()
        try:
            fn(*args)
            print(f"ok   {fn.__name__} ({time.time() - t:.1f} s)", flush=True)
        except Exception:  # noqa: BLE001
            failures.append(fn.__name__)
            print(f"FAIL {fn.__name__}\n{traceback.format_exc()}", flush=True)
    return failures
