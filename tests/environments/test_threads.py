"""``one_thread``: every thread pool at one thread inside, restored after, including a pool
loaded after its first use."""

from __future__ import annotations

from threadpoolctl import threadpool_info

from privgames.environments.threads import one_thread


def test_one_thread_limits_every_pool_and_restores_them():
    with one_thread():
        pass
    import sklearn.cluster  # noqa: F401  (OpenMP and scipy's BLAS, perhaps for the first time)

    before = {p["filepath"]: p["num_threads"] for p in threadpool_info()}
    with one_thread():
        assert all(p["num_threads"] == 1 for p in threadpool_info())
        with one_thread():  # nested, as a Ray task inside a limited block would be
            assert all(p["num_threads"] == 1 for p in threadpool_info())
    assert {p["filepath"]: p["num_threads"] for p in threadpool_info()} == before
