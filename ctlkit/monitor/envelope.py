"""The envelope of one growing series: what the monitor's plot draws of it.

A redraw must cost the same at step 1 000 and at step 1 000 000, and a spike must stay visible
however long the run. So the values are cut into buckets of consecutive steps; each bucket keeps
where its smallest and largest value are and the sum and count of its finite values (for the
smoothed mean), and the number of buckets stays bounded: neighbours merge as the series grows.
"""
from __future__ import annotations

import numpy as np


def _bucket_stats(values, start, count, size):
    """Per bucket of ``size`` values from ``start``: the index of its smallest and of its
    largest finite value (its first index if it has none), and the sum and the number of its
    finite values."""
    chunk = values[start:start + count * size].reshape(count, size)
    finite = np.isfinite(chunk)
    base = start + size * np.arange(count)
    lo = base + np.where(finite, chunk, np.inf).argmin(axis=1)
    hi = base + np.where(finite, chunk, -np.inf).argmax(axis=1)
    return lo, hi, np.where(finite, chunk, 0.0).sum(axis=1), finite.sum(axis=1).astype(float)


def _better(values, a, b, op):
    """Per pair, whichever of the indices ``a``, ``b`` points at the finite value that ``op``
    prefers (np.less: the smaller)."""
    va, vb = values[a], values[b]
    return np.where(np.isfinite(vb) & (~np.isfinite(va) | op(vb, va)), b, a)


class Envelope:
    """What is drawn of one growing series, kept up to date as it grows.

    The values are cut into buckets of ``size`` consecutive steps; each bucket keeps where its
    smallest and largest finite values are (so a spike is drawn, not skipped by a stride) and
    the sum and count of its finite values (for the smoothed mean). When there are more than
    ``limit`` buckets, neighbours merge and ``size`` doubles. A redraw therefore reads at most
    ``limit`` buckets plus the newest values that do not fill one yet (fewer than ``size``),
    and each value is bucketed once: the cost does not grow with the length of the run.
    """

    def __init__(self, limit: int):
        self.limit, self.size, self.done = limit, 1, 0      # done: values in whole buckets
        self.lo = self.hi = np.zeros(0, np.int64)
        self.total = self.count = np.zeros(0)

    def update(self, values):
        if not self.done:                        # new, maybe for a long series: start at the
            while len(values) // self.size > self.limit:    # size merging would reach
                self.size *= 2
        fresh = (len(values) - self.done) // self.size
        if fresh:
            stats = _bucket_stats(values, self.done, fresh, self.size)
            self.lo, self.hi, self.total, self.count = (
                np.concatenate([old, new]) for old, new in
                zip((self.lo, self.hi, self.total, self.count), stats))
            self.done += fresh * self.size
        while len(self.lo) > self.limit:
            if len(self.lo) % 2:                 # the odd one out goes back to the tail
                self.lo, self.hi, self.total, self.count = (
                    a[:-1] for a in (self.lo, self.hi, self.total, self.count))
                self.done -= self.size
            self.lo = _better(values, self.lo[0::2], self.lo[1::2], np.less)
            self.hi = _better(values, self.hi[0::2], self.hi[1::2], np.greater)
            self.total = self.total[0::2] + self.total[1::2]
            self.count = self.count[0::2] + self.count[1::2]
            self.size *= 2

    def _with_tail(self, values):
        tail = len(values) - self.done
        if not tail:
            return self.lo, self.hi, self.total, self.count
        return tuple(np.concatenate([a, b]) for a, b in
                     zip((self.lo, self.hi, self.total, self.count),
                         _bucket_stats(values, self.done, 1, tail)))

    def points(self, values) -> np.ndarray:
        """Indices to draw, in order: the first and last value and each bucket's extremes."""
        n = len(values)
        if n == 0:
            return np.zeros(0, np.int64)
        lo, hi, _, _ = self._with_tail(values)
        idx = np.empty(2 * len(lo) + 2, np.int64)
        idx[0], idx[-1] = 0, n - 1
        idx[1:-1:2], idx[2:-1:2] = np.minimum(lo, hi), np.maximum(lo, hi)
        return idx[np.concatenate([[True], idx[1:] != idx[:-1]])]

    def extremes(self, values, which: str) -> np.ndarray:
        """Indices of one side only, in order: the first and last value and each bucket's
        smallest (``which="lo"``) or largest (``"hi"``) value: a band's lower or upper edge."""
        n = len(values)
        if n == 0:
            return np.zeros(0, np.int64)
        lo, hi, _, _ = self._with_tail(values)
        idx = np.concatenate([[0], lo if which == "lo" else hi, [n - 1]]).astype(np.int64)
        return idx[np.concatenate([[True], idx[1:] != idx[:-1]])]

    def means(self, values, window: int):
        """(index of each bucket's last value, mean of the finite values among the ``window``
        or so values that end there): a trailing mean, NaN where no value is finite."""
        n = len(values)
        if n == 0:
            return np.zeros(0, np.int64), np.zeros(0)
        _, _, total, count = self._with_tail(values)
        k = max(1, round(window / self.size))    # the window, in buckets
        sums = np.concatenate([[0.0], np.cumsum(total)])
        counts = np.concatenate([[0.0], np.cumsum(count)])
        j = np.arange(1, len(total) + 1)
        lo = np.maximum(0, j - k)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = (sums[j] - sums[lo]) / (counts[j] - counts[lo])
        return np.minimum(j * self.size - 1, n - 1), means
