"""The monitor's history: every logged value, kept as growing NumPy columns, and the
fixed-size envelope of each curve that the plot draws (so a redraw costs the same at step 1 000
and at step 1 000 000; each bucket of steps keeps its smallest and largest value, so spikes stay
visible)."""
from __future__ import annotations

import math
import operator

import numpy as np

from .envelope import Envelope

TOP = 8     # curves drawn of a group; more are folded into one band (History.panels)


# -- the history --------------------------------------------------------------------------------
def _grown(buf, capacity, fill):
    new = np.full(capacity, fill, dtype=buf.dtype)
    new[:len(buf)] = buf
    return new


class History:
    """Every logged value: one float per step for each key (NaN where the key was not logged)
    and one per ``log_epoch()`` call for end-of-epoch keys.

    ``history["loss"]`` is a NumPy copy of a series, ``history.steps`` and
    ``history.epoch_steps`` the step numbers, ``len(history)`` the number of steps. The
    series grow in place (appending is amortized O(1)), and a change is published as one
    assignment, so an interrupt sees the history before or after it, never half-written.
    """

    def __init__(self):
        # (number of steps, step numbers, {key: values}); the buffers have spare room at
        # the end, which readers never see: only whole states are swapped in
        self._state = (0, np.zeros(0, np.int64), {})
        self._epochs = ((), {})                  # (steps, {key: values}), tuples: swapped whole
        self._envelopes = {}                     # (key, size limit) -> Envelope, for drawing
        self._shown = {}                         # group -> the keys drawn as lines (see panels)
        self._bands = {}                         # group -> (rows done, lower, upper edge)

    # -- reading ------------------------------------------------------------------------------
    def __len__(self):
        return self._state[0]

    @property
    def steps(self) -> np.ndarray:
        n, steps, _ = self._state
        return steps[:n].copy()

    @property
    def epoch_steps(self) -> np.ndarray:
        return np.array(self._epochs[0], dtype=np.int64)

    @property
    def last_step(self):
        n, steps, _ = self._state
        return int(steps[n - 1]) if n else None

    def __getitem__(self, key) -> np.ndarray:
        n, _, series = self._state
        if key in series:
            return series[key][:n].copy()
        if key in self._epochs[1]:
            return np.array(self._epochs[1][key], dtype=np.float64)
        raise KeyError(f"{key!r} was never logged; logged: {sorted(self.keys())}")

    def last(self, key):
        """The newest value under ``key`` (NaN if it was not logged then), or None."""
        n, _, series = self._state
        if key in series:
            return float(series[key][n - 1])
        vs = self._epochs[1].get(key)
        return vs[-1] if vs else None

    def keys(self):
        return self.step_keys() + self.epoch_keys()

    def step_keys(self):
        return list(self._state[2])

    def epoch_keys(self):
        return list(self._epochs[1])

    def __contains__(self, key):
        return key in self._state[2] or key in self._epochs[1]

    # -- writing ------------------------------------------------------------------------------
    def add(self, step: int, values: dict):
        self.extend([step], {k: [v] for k, v in values.items()})

    def extend(self, steps, columns: dict):
        """Append several steps at once: ``columns`` maps a key to one float per step (NaN
        where the key was not logged). A key seen for the first time is NaN before. Steps must
        increase. Everything is checked before anything changes."""
        steps = np.asarray(steps)
        if steps.ndim != 1 or (steps.size and steps.dtype.kind not in "iu"):
            raise TypeError(f"steps must be a list of ints, got {steps!r:.80}")
        k = len(steps)
        new = {}
        for key, vs in columns.items():
            try:
                a = np.asarray(vs, dtype=np.float64)
            except (TypeError, ValueError) as e:
                raise TypeError(f"column {key!r} must hold one float per step: {e}") from e
            if a.shape != (k,):
                raise ValueError(f"column {key!r} has shape {list(a.shape)} for {k} steps")
            if key in self._epochs[1]:
                raise ValueError(f"{key!r} is already an end-of-epoch key; give the per-step "
                                 f"value another name")
            new[key] = a
        n, step_buf, series = self._state
        if k == 0:
            return
        last = steps[0] - 1 if n == 0 else step_buf[n - 1]
        if not (np.diff(steps, prepend=last) > 0).all():
            raise ValueError(f"steps must increase: got {steps.tolist()[:8]} after step {last}")
        if n + k > len(step_buf):                # new buffers, with room to grow
            room = max(2 * len(step_buf), n + k, 1024)
            step_buf = _grown(step_buf[:n], room, 0)
            series = {key: _grown(buf[:n], room, math.nan) for key, buf in series.items()}
        else:
            series = dict(series)                # new keys stay unseen until the swap
        step_buf[n:n + k] = steps
        for key, buf in series.items():
            buf[n:n + k] = new.get(key, math.nan)
        for key, a in new.items():
            if key not in series:
                series[key] = np.full(len(step_buf), math.nan)
                series[key][n:n + k] = a
        self._state = (n + k, step_buf, series)  # the one change readers can see

    def add_epoch(self, step: int, values: dict):
        if step is None or isinstance(step, bool):
            raise TypeError(f"step must be an int, got {step!r}")
        step = operator.index(step)
        clash = [k for k in values if k in self._state[2]]
        if clash:
            raise ValueError(f"{clash[0]!r} is already a per-step key; give the end-of-epoch "
                             f"value another name (e.g. 'val_{clash[0]}')")
        floats = {k: float(v) for k, v in values.items()}
        steps, series = self._epochs
        grown = {k: vs + (floats.get(k, math.nan),) for k, vs in series.items()}
        for k, v in floats.items():
            if k not in grown:
                grown[k] = (math.nan,) * len(steps) + (v,)
        self._epochs = (steps + (step,), grown)

    # -- drawing ------------------------------------------------------------------------------
    def panels(self, max_points: int = 400, top: int = TOP, rerank: bool = True):
        """[(panel title, [(label, steps, values, style)])]: at most four panels (loss,
        gradient norms, learning rate, other metrics), since each axis costs drawing time.
        Each curve has at most ``max_points`` points, whatever the length of the run, and
        the cost of this call does not grow with it either (see ``Envelope``).

        A group of more than ``top`` curves (the per-layer norms, the metrics) is drawn as the
        ``top`` with the largest latest value and one band, style ``"band"``, for the whole
        group: the smallest and largest value of all its curves at each step (``steps`` and
        ``values`` run along the upper edge and back along the lower one), labelled with the
        number of curves it folds. So a picture holds a bounded number of curves and legend
        entries, however many layers are logged. ``rerank=False`` keeps the curves chosen at
        the last call (a plotter reranks only when it may redraw its legend)."""
        if isinstance(max_points, bool) or not isinstance(max_points, (int, np.integer)) \
                or max_points < 8:
            raise ValueError(f"max_points must be an int >= 8, got {max_points!r}")
        if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 1:
            raise ValueError(f"top must be an int >= 1, got {top!r}")
        n, step_buf, series = self._state
        steps, limit = step_buf[:n], (max_points - 4) // 2
        ep_steps, ep_series = self._epochs
        stride = max(1, -(-len(ep_steps) // max_points))
        ep = np.asarray(ep_steps[::stride], dtype=np.int64)

        def curve(key, label, style):
            values = series[key][:n]
            idx = self._envelope(key, limit, values).points(values)
            return label, steps[idx], values[idx], style

        def epoch_curve(key):
            return key, ep, np.asarray(ep_series[key][::stride], dtype=np.float64), "points"

        def group(name, keys, labels, noun, style="line"):
            """Curves for ``keys``: all of them, or the top few and one band (see above)."""
            if len(keys) <= top:
                return [curve(k, label, style) for k, label in zip(keys, labels)]
            shown = self._shown.get(name)
            if rerank or shown is None or not set(shown) <= set(keys):
                last = np.array([series[k][n - 1] for k in keys]) if n else np.zeros(len(keys))
                last = np.where(np.isfinite(last), last, -np.inf)
                order = np.argsort(-last, kind="stable")[:top]      # the largest first
                shown = self._shown[name] = [keys[i] for i in order]
            label_of = dict(zip(keys, labels))
            return ([self._band_curve(name, keys, noun, len(keys) - len(shown), limit)]
                    + [curve(k, label_of[k], style) for k in shown])

        def epoch_group(name, keys, noun):
            if len(keys) <= top:
                return [epoch_curve(k) for k in keys]
            cols = {k: np.asarray(ep_series[k][::stride], dtype=np.float64) for k in keys}
            shown = self._shown.get(name)
            if rerank or shown is None or not set(shown) <= set(keys):
                last = np.array([cols[k][-1] for k in keys])
                last = np.where(np.isfinite(last), last, -np.inf)
                shown = self._shown[name] = [keys[i] for i in
                                             np.argsort(-last, kind="stable")[:top]]
            table = np.stack([cols[k] for k in keys])
            lo, hi = np.fmin.reduce(table, axis=0), np.fmax.reduce(table, axis=0)
            band = (_band_label(len(keys) - len(shown), noun, len(keys)),
                    np.concatenate([ep, ep[::-1]]), np.concatenate([hi, lo[::-1]]), "band")
            return [band] + [epoch_curve(k) for k in shown]

        out = []
        if "loss" in series:
            values = series["loss"][:n]
            ends, means = self._envelope("loss", limit, values).means(values, max(1, n // 40))
            loss = [curve("loss", "loss", "raw"), ("smoothed", steps[ends], means, "line")]
            loss += epoch_group("epoch losses", [k for k in ep_series if k.endswith("loss")],
                                "end-of-epoch losses")
            out.append(("loss", loss))
        layers = [k for k in series if k.startswith("layer/")]
        short = [k.rsplit("/", 1)[-1] for k in layers]
        if len(set(short)) < len(short):
            short = [k[len("layer/"):] for k in layers]
        norms = [curve("grad_norm", "global", "bold")] if "grad_norm" in series else []
        norms += group("layers", layers, short, "layers")
        if norms:
            out.append(("gradient norms", norms))
        other = [k for k in series if k not in ("loss", "grad_norm") and
                 not k.startswith("layer/")]
        lr = [k for k in other if k in ("lr", "learning_rate") or "learning_rate" in k]
        if lr:
            out.append(("learning rate", group("learning rates", lr, lr, "learning rates")))
        rest = [k for k in other if k not in lr]
        metrics = group("metrics", rest, rest, "metrics")
        metrics += epoch_group("epoch metrics", [k for k in ep_series if not k.endswith("loss")],
                               "end-of-epoch metrics")
        if metrics:
            out.append(("metrics", metrics))
        return out

    def _band_curve(self, name, keys, noun, folded, limit):
        """The band of a group: each step's smallest and largest value over ``keys``, kept up
        to date one new row at a time (a new key was NaN before, so old rows stay right), and
        drawn through an ``Envelope`` of each edge: the cost does not grow with the run."""
        n, step_buf, series = self._state
        done, lo, hi = self._bands.get(name, (0, np.zeros(0), np.zeros(0)))
        if n > len(lo):
            room = max(2 * len(lo), n, 1024)
            lo, hi = _grown(lo[:done], room, math.nan), _grown(hi[:done], room, math.nan)
        if n > done:
            table = np.stack([series[k][done:n] for k in keys])
            lo[done:n], hi[done:n] = np.fmin.reduce(table, axis=0), np.fmax.reduce(table, axis=0)
        self._bands[name] = (n, lo, hi)
        lo, hi, steps = lo[:n], hi[:n], step_buf[:n]
        i_hi = self._envelope(("band hi", name), limit, hi).extremes(hi, "hi")
        i_lo = self._envelope(("band lo", name), limit, lo).extremes(lo, "lo")[::-1]
        return (_band_label(folded, noun, len(keys)), np.concatenate([steps[i_hi], steps[i_lo]]),
                np.concatenate([hi[i_hi], lo[i_lo]]), "band")

    def _envelope(self, key, limit, values):
        env = self._envelopes.get((key, limit))
        if env is None:
            env = self._envelopes[(key, limit)] = Envelope(limit)
        env.update(values)
        return env



def _band_label(folded, noun, total):
    return f"+{folded} more {noun}; band: min-max of all {total}"
