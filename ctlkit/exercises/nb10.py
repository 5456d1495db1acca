"""Notebook 10, distributed training: a replica's share of the loss, a distributed training step, and
a clipped distributed step whose threshold is stated for the global batch's gradient."""
from __future__ import annotations

import functools

import numpy as np
import tensorflow as tf

from ..checks import ContextError, Report, check_function, check_step
from ._common import digits_like, digits_mlp


def _per_example_loss(labels, logits):
    import keras
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)(labels, logits)


# -- 10.replica_loss ------------------------------------------------------------------------------
def _reference_replica_loss(labels, logits, global_batch_size):
    return tf.nn.compute_average_loss(_per_example_loss(labels, logits),
                                      global_batch_size=global_batch_size)


def replica_loss(fn):
    rng = np.random.default_rng(100)
    logits = tf.constant(rng.normal(size=(48, 10)), tf.float32)
    labels = tf.constant(rng.integers(0, 10, 48), tf.int32)
    cases = {
        "a replica's 32 examples of a global batch of 64": (labels[:32], logits[:32], 64),
        "a replica's 17 examples of an uneven global batch of 33": (labels[:17], logits[:17], 33),
        "the whole global batch of 48 on one replica": (labels, logits, 48),
        "global_batch_size as an int32 tensor, tf.constant(64)": (labels[:32], logits[:32],
                                                                  tf.constant(64)),
        "int64 labels, 16 examples of 48": (tf.cast(labels[:16], tf.int64), logits[:16], 48),
        "confident logits (x 50): per-example losses from ~0 to hundreds": (labels[:24],
                                                                           50.0 * logits[:24], 96),
    }
    report = check_function(fn, _reference_replica_loss, cases, name="replica_loss",
                            differentiable=True, rtol=1e-5, atol=1e-7)
    if not report.ok and not any("not written yet" in p for p in report.problems):
        hint = _replica_loss_hint(fn, cases)
        if hint:
            report.problems.insert(0, hint)
    return report


def _replica_loss_hint(fn, cases):
    """Name the slip when every case matches one of the usual wrong formulas."""
    slips = (
        ("you took the mean over this replica's own examples (tf.reduce_mean, or a Keras loss with "
         "its default reduction): the replicas' losses are summed, so each must be its sum divided "
         "by the GLOBAL batch size (on 32 of 64 examples yours is 2 times too big)",
         lambda y, z, g: tf.reduce_mean(_per_example_loss(y, z))),
        ("you summed this replica's losses but never divided by global_batch_size",
         lambda y, z, g: tf.reduce_sum(_per_example_loss(y, z))),
        ("you divided by a fixed 64 (the notebook's GLOBAL), not by the global_batch_size argument",
         lambda y, z, g: tf.reduce_sum(_per_example_loss(y, z)) / 64.0),
    )
    try:
        got = {k: np.asarray(fn(*args), np.float64) for k, args in cases.items()}
    except Exception:  # the case messages report errors
        return None
    for sentence, slip in slips:
        if all(got[k].shape == () and np.isclose(got[k], float(slip(*args)), rtol=1e-5)
               for k, args in cases.items()):
            return sentence + "."
    return None


# -- 10.distributed_step --------------------------------------------------------------------------
_STRATEGIES = {}


def default_strategy():
    """The strategy a check runs under when the notebook passes none: the one in scope, else a
    MirroredStrategy over the first two logical CPUs if the process has them, else the default
    (one replica, where replica-count mistakes cannot show)."""
    if tf.distribute.has_strategy():
        return tf.distribute.get_strategy()
    cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
    if len(cpus) >= 2:
        key = tuple(cpus[:2])
        if key not in _STRATEGIES:
            _STRATEGIES[key] = tf.distribute.MirroredStrategy(list(key))
        return _STRATEGIES[key]
    return tf.distribute.get_strategy()


def _reference_distributed_step(strategy, model, optimizer, global_batch_size):
    @tf.function
    def step(x, y):
        def replica_fn(x, y):
            with tf.GradientTape() as tape:
                loss = tf.nn.compute_average_loss(_per_example_loss(y, model(x, training=True)),
                                                  global_batch_size=global_batch_size)
            optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                          model.trainable_variables))
            return loss
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(replica_fn, args=(x, y)),
                               axis=None)
    return step


def _slips(replicas):
    """What an update (or a returned loss) exactly R, or 1/R, times the reference's means."""
    if replicas < 2:
        return None
    return {replicas: f"{replicas} is the number of replicas: each replica's loss was the mean over "
                      f"its own examples (tf.reduce_mean), so the summed gradients are {replicas} "
                      f"times too big; divide each replica's summed loss by the global batch size "
                      f"(tf.nn.compute_average_loss(..., global_batch_size=...)), or gradients "
                      f"already summed were summed again (apply_gradients inside strategy.run adds "
                      f"the replicas' gradients up)",
            1 / replicas: "that is one over the number of replicas: the replicas' values were "
                          "averaged (ReduceOp.MEAN) where each is already a share of the global "
                          "mean and they must be summed (ReduceOp.SUM)"}


def _runs(strategy, replicas, labels=None):
    """[(global batch size, {label: distributed batch})]: two global batches of 64, then two of 33
    (uneven over 2 replicas). ``labels`` (one word per batch) say more about a batch."""
    runs = []
    for global_batch, seeds in ((64, (101, 102)), (33, (103, 104))):
        batches = {}
        for k, seed in enumerate(seeds):
            batch, split = _distribute(strategy, *digits_like(global_batch, seed, 1.0 + 3.0 * k))
            even = "" if global_batch % replicas == 0 else ", uneven"
            more = f", {labels[k]}" if labels else ""
            batches[f"{'another' if k else 'a'} global batch of {global_batch} ({split} on "
                    f"{replicas} replica(s){even}{more})"] = batch
        runs.append((global_batch, batches))
    return runs


def _name_factor(problems, replicas):
    """The problems, led by the slip an exact factor R or 1/R means when only a weight's message
    shows that factor (check_step names a factor of the whole update, but float32 rounding of
    the smallest weight changes can hide it there)."""
    slips = _slips(replicas)
    if not slips or any("number of replicas" in p for p in problems):
        return problems
    for value, meaning in slips.items():
        words = f"1/{replicas}" if value < 1 else f"{replicas}"
        if any(f"yours is {words} times the expected" in p for p in problems):
            return [f"your step's update is {words} times the reference's on some weights: "
                    f"{meaning}.", *problems]
    return problems


class StrategyMistake(TypeError):
    """Raised through the checker's report when per-replica values end up where one value belongs."""


class _OneValue:
    """The learner's tf.function, made to refuse per-replica results with a clear message."""

    def __init__(self, step):
        self._step = step

    def experimental_get_tracing_count(self):
        return self._step.experimental_get_tracing_count()

    def __call__(self, *batch):
        try:
            out = self._step(*batch)
        except Exception as e:  # re-raised, with what to do when it is ours
            if "PerReplica" in str(e) or "DistributedValues" in str(e):
                raise StrategyMistake(
                    "a distributed batch (one tensor per replica) reached code outside "
                    "strategy.run: put the forward pass, the loss and apply_gradients in a "
                    "replica function and call strategy.run(replica_fn, args=(x, y))") from None
            raise
        if isinstance(out, tf.distribute.DistributedValues):
            raise StrategyMistake("it returned one value per replica (a PerReplica); combine them "
                                   "into one number with strategy.reduce(tf.distribute.ReduceOp.SUM, "
                                   "..., axis=None)")
        return out


def _bind(fn, strategy):
    def factory(model, optimizer, global_batch_size):
        step = fn(strategy, model, optimizer, global_batch_size)
        return _OneValue(step) if hasattr(step, "experimental_get_tracing_count") else step
    return factory


def _build(strategy):
    """Two calls give the same model (and a built SGD), made in the strategy's scope."""
    import keras
    with strategy.scope():
        model = digits_mlp(32, "relu", seed=10)
        optimizer = keras.optimizers.SGD(learning_rate=0.1)
        optimizer.build(model.trainable_variables)
    return model, optimizer


def _state(model, optimizer):
    return {"iterations": int(optimizer.iterations.numpy())}


def _distribute(strategy, x, y):
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(len(x))
    batch = next(iter(strategy.experimental_distribute_dataset(ds)))
    sizes = [int(t.shape[0]) for t in strategy.experimental_local_results(batch[0])]
    return batch, " + ".join(map(str, sizes))


def _strategy(strategy):
    """The notebook's strategy, checked, or default_strategy() when it passed none."""
    if strategy is not None and not isinstance(strategy, tf.distribute.Strategy):
        raise ContextError(f"strategy must be a tf.distribute.Strategy (the notebook's "
                           f"MirroredStrategy), got {type(strategy).__name__}")
    return strategy if strategy is not None else default_strategy()


def _unwritten(fn, strategy, *more):
    """True when the learner's factory still raises NotImplementedError: said before any model or
    data is built. Any other error is left for check_step, which calls it with the real model."""
    try:
        fn(strategy, None, None, 64, *more)
    except NotImplementedError:
        return True
    except Exception:  # it needs the real model: check_step below will see
        pass
    return False


def distributed_step(fn, strategy=None):
    """Run the learner's step and the reference beside each other under ``strategy`` (the
    notebook's, or default_strategy()), first on global batches of 64, then on 33 examples,
    which do not split evenly over 2 replicas."""
    name = "make_distributed_step"
    strategy = _strategy(strategy)
    replicas = strategy.num_replicas_in_sync
    if _unwritten(fn, strategy):
        return Report(name=name, problems=[f"{name}: not written yet (it raised "
                                           f"NotImplementedError)."], cases=0)
    build = functools.partial(_build, strategy)

    runs = _runs(strategy, replicas)

    cases = 0
    for global_batch, batches in runs:
        report = check_step(_bind(fn, strategy), _bind(_reference_distributed_step, strategy), build,
                            batches, args=(global_batch,), state=_state, name=name,
                            rtol=1e-4, atol=1e-6, slips=_slips(replicas))
        cases += report.cases
        if not report.ok:
            problems = _name_factor(list(report.problems), replicas)
            if cases > report.cases and all("differs" in p for p in problems):
                problems.append(f"it is right on global batches of 64 but not on {global_batch} "
                                f"examples: divide each replica's summed loss by the "
                                f"global_batch_size argument ({global_batch} here), not by a fixed "
                                f"number, and not by its own batch size x replicas (what Keras' "
                                f"default reduction does)")
            return Report(name=name, problems=problems, cases=cases)
    return Report(name=name, problems=[], cases=cases)



# -- 10.clipped_step ------------------------------------------------------------------------------
CLIP = 1.5      # the checker's own data and weights (fixed seeds): the all-reduced gradient's norm
                # is 0.71 and 0.73 on the batches of pixels in [0, 1], 5.6 and 6.0 on those in
                # [0, 4], where each replica's share is 3.1 to 3.6: above the clip too


def _reference_clipped_step(strategy, model, optimizer, global_batch_size, clip):
    @tf.function
    def step(x, y):
        def replica_fn(x, y):
            with tf.GradientTape() as tape:
                loss = tf.nn.compute_average_loss(_per_example_loss(y, model(x, training=True)),
                                                  global_batch_size=global_batch_size)
            return loss, tape.gradient(loss, model.trainable_variables)
        losses, shares = strategy.run(replica_fn, args=(x, y))
        loss = strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)
        grads = [strategy.reduce(tf.distribute.ReduceOp.SUM, g, axis=None) for g in shares]
        grads, norm = tf.clip_by_global_norm(grads, clip)
        optimizer.apply(grads, model.trainable_variables)
        return loss, norm
    return step


def clipped_step(fn, strategy=None):
    """The learner's ``make_clipped_step(strategy, model, optimizer, global_batch_size, clip)``
    beside the reference under ``strategy``: global batches of 64 then of 33, in each run one batch
    whose all-reduced gradient is shorter than the clip and one whose gradient (and every replica's
    share of it) is longer."""
    name = "make_clipped_step"
    strategy = _strategy(strategy)
    replicas = strategy.num_replicas_in_sync
    if _unwritten(fn, strategy, CLIP):
        return Report(name=name, problems=[f"{name}: not written yet (it raised "
                                           f"NotImplementedError)."], cases=0)
    build = functools.partial(_build, strategy)

    def bind(factory):
        def make(model, optimizer, global_batch_size, clip):
            step = factory(strategy, model, optimizer, global_batch_size, clip)
            return _OneValue(step) if hasattr(step, "experimental_get_tracing_count") else step
        return make

    runs = _runs(strategy, replicas, labels=(f"its gradient shorter than the clip {CLIP}",
                                             f"its gradient longer than the clip {CLIP}"))
    cases = 0
    for global_batch, batches in runs:
        report = check_step(bind(fn), bind(_reference_clipped_step), build, batches,
                            args=(global_batch, CLIP), state=_state, name=name, rtol=1e-4,
                            atol=1e-6, slips=_slips(replicas))
        cases += report.cases
        if not report.ok:
            problems = _name_factor(list(report.problems), replicas)
            return Report(name=name, problems=_clip_hints(problems, global_batch), cases=cases)
    return Report(name=name, problems=[], cases=cases)


def _clip_hints(problems, global_batch):
    """The report's sentences, led by what the first one most likely means."""
    first = problems[0]
    if any("number of replicas" in p for p in problems):
        return problems                                   # a slip with a name: said already
    if "returned[1] differs" in first:
        hint = ("the gradient norm your step returned is not the reference's: return the global "
                "norm of the all-reduced gradient (the replicas' shares summed), taken before "
                "clipping; tf.clip_by_global_norm returns it as its second value. A sum or mean of "
                "each replica's own norm is not that norm, and after clipping it is at most the clip")
    elif "returned[0] differs" in first:
        hint = (f"the loss your step returned is not the mean over the global batch: sum the "
                f"replicas' losses (strategy.reduce SUM), each its summed losses divided by "
                f"global_batch_size ({global_batch} here), not by a fixed number such as the "
                f"notebook's GLOBAL = 64")
    elif "longer than the clip" in first and "after the step" in first:
        hint = ("the update differs on a batch whose gradient is longer than the clip: clip the "
                "all-reduced gradient (the sum of the replicas' shares) to the threshold, after "
                "strategy.run, as one device clips its whole batch's gradient; clipping each "
                "replica's share (or Keras' clipnorm / global_clipnorm, which do that) lets the "
                "update grow up to R times the threshold")
    elif "shorter than the clip" in first and "after the step" in first:
        hint = ("the update differs already on a batch whose gradient is shorter than the clip, "
                "where clipping changes nothing: look at the loss scaling (the global batch) and at "
                "how the gradients are summed and applied (once, after the all-reduce)")
    else:
        return problems
    return [hint + ".", *problems]


EXERCISES = {"replica_loss": replica_loss, "distributed_step": distributed_step,
             "clipped_step": clipped_step}
