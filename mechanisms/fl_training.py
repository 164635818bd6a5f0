"""Federated training of the pricing paper's squared-SVM (section IV's experiments), vectorised
over clients: ``F(w) = lambda/2 ||w||^2 + mean_j 1/2 max(0, 1 - y_j w^T x_j)^2``.

Each round every client runs ``steps`` gradient steps from the global model on its own data,
adds its noise ``N(0, sigma_i^2 I)`` and uploads; the server aggregates by the mean (eq 7) or
the MLE rule (eq 8, weights ``1 / sigma_i^2``; a client with ``sigma_i = inf`` has opted out).
Arrays: ``w`` is ``(..., d)``, client data ``X`` ``(clients, n, d)``, labels ``y`` in {-1, +1}.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from privgames.mechanisms.validation import ConfigError


def svm_loss(w: NDArray, X: NDArray, y: NDArray, lam: float) -> NDArray:
    """The squared-SVM loss of ``w`` on ``(X, y)`` (per leading index of ``X``)."""
    margin = np.maximum(0.0, 1.0 - y * np.einsum("...nd,...d->...n", X, w))
    return 0.5 * lam * np.sum(w * w, axis=-1) + 0.5 * np.mean(margin * margin, axis=-1)


def svm_gradient(w: NDArray, X: NDArray, y: NDArray, lam: float) -> NDArray:
    """``lambda w - mean_j max(0, 1 - y_j w^T x_j) y_j x_j`` (per client; batched BLAS)."""
    scores = np.matmul(X, w[..., None])[..., 0]
    margin = np.maximum(0.0, 1.0 - y * scores)
    pull = np.matmul((margin * y)[..., None, :], X)[..., 0, :]
    return lam * w - pull / X.shape[-2]


def svm_loss_and_gradient(w: NDArray, X: NDArray, y: NDArray, lam: float,
                          counts: NDArray) -> tuple[float, NDArray]:
    """:func:`svm_loss` and :func:`svm_gradient` of one model on a data set given as its
    distinct rows ``(X, y)`` (2-D) and their multiplicities ``counts``: samples drawn with
    replacement repeat rows, so the same mean costs one pass over the distinct rows (the
    digits' 898 instead of 10^5), and the scores are shared by loss and gradient."""
    margin = np.maximum(0.0, 1.0 - y * (X @ w))
    weighted = counts * margin / counts.sum()
    loss = 0.5 * lam * float(w @ w) + 0.5 * float(weighted @ margin)
    return loss, lam * w - (weighted * y) @ X


def smoothness(X: NDArray, lam: float) -> float:
    """An upper bound on the loss's smoothness ``L_F``: ``lambda`` plus the largest
    ``||X_i||_2^2 / n`` over clients (the squared hinge's curvature is at most 1)."""
    top = max(float(np.linalg.norm(x, 2)) ** 2 / x.shape[0] for x in X)
    return lam + top


#: Clients trained together: blocks whose data stay in cache across the local steps (one
#: pass over all clients' data per step would be memory-bound).
BLOCK_BYTES = 2**20


def local_updates(w: NDArray, X: NDArray, y: NDArray, lam: float, lr: float,
                  steps: int) -> NDArray:
    """Every client's model after ``steps`` gradient steps from the global ``w``, a block of
    clients at a time (each client's arithmetic is the same whatever the blocks)."""
    local = np.broadcast_to(w, (X.shape[0], w.shape[-1])).copy()
    block = max(1, BLOCK_BYTES // max(X[0].nbytes, 1))
    for start in range(0, X.shape[0], block):
        part = slice(start, start + block)
        for _ in range(steps):
            local[part] -= lr * svm_gradient(local[part], X[part], y[part], lam)
    return local


def aggregate(updates: NDArray, sigma: NDArray, rule: str) -> NDArray:
    """Eq (7) (mean of the participants) or eq (8) (inverse-variance weights); clients with
    ``sigma = inf`` sent nothing, a client with ``sigma = 0`` takes all the MLE weight."""
    sigma = np.asarray(sigma, dtype=float)
    present = np.isfinite(sigma)
    if not present.any():
        raise ConfigError("every client opted out: there is nothing to aggregate")
    if rule == "mean":
        return updates[present].mean(axis=0)
    if rule != "mle":
        raise ConfigError(f"aggregation={rule!r} is not allowed: aggregation must be mle or mean")
    exact = sigma == 0
    if exact.any():
        return updates[exact].mean(axis=0)
    weight = np.where(present, sigma**-2.0, 0.0)
    return np.einsum("i,id->d", weight, np.where(present[:, None], updates, 0.0)) / weight.sum()


def accuracy(w: NDArray, X: NDArray, y: NDArray, counts: NDArray) -> float:
    """Share of ``sign(w^T x) = y`` over a data set given as distinct rows and their
    multiplicities (exact: an integer count over the total)."""
    return int(counts @ (np.sign(X @ w) == y)) / int(counts.sum())
