"""What the serve suites (test_serve.py, test_libre_client.py) share."""
import threading


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
