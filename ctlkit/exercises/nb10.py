"""Notebook 10, distributed training: a replica's share of the loss, a distributed training step."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from ..checks import ContextError, Report, check_function, check_step


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
    return check_function(fn, _reference_replica_loss, cases, name="replica_loss",
                          differentiable=True, rtol=1e-5, atol=1e-7)


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
        except Exception as e:  # noqa: BLE001 - re-raised, with what to do when it is ours
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


def _digits_like(n, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    return (rng.uniform(0, scale, (n, 8, 8, 1)).astype("float32"),
            rng.integers(0, 10, n).astype("int32"))


def _distribute(strategy, x, y):
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(len(x))
    batch = next(iter(strategy.experimental_distribute_dataset(ds)))
    sizes = [int(t.shape[0]) for t in strategy.experimental_local_results(batch[0])]
    return batch, " + ".join(map(str, sizes))


def distributed_step(fn, strategy=None):
    """Run the learner's step and the reference beside each other under ``strategy`` (the
    notebook's, or default_strategy()), first on global batches of 64, then on 33 examples,
    which do not split evenly over 2 replicas."""
    import keras
    name = "make_distributed_step"
    if strategy is not None and not isinstance(strategy, tf.distribute.Strategy):
        raise ContextError(f"strategy must be a tf.distribute.Strategy (the notebook's "
                           f"MirroredStrategy), got {type(strategy).__name__}")
    strategy = strategy if strategy is not None else default_strategy()
    replicas = strategy.num_replicas_in_sync
    try:                      # an unwritten exercise is reported before models and data are built
        fn(strategy, None, None, 64)
    except NotImplementedError:
        return Report(name=name, problems=[f"{name}: not written yet (it raised "
                                           f"NotImplementedError)."], cases=0)
    except Exception:  # noqa: BLE001 - it needs the real model: check_step below will see
        pass

    def build():
        with strategy.scope():
            keras.utils.set_random_seed(10)
            model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(),
                                      keras.layers.Dense(32, activation="relu"),
                                      keras.layers.Dense(10)])
            optimizer = keras.optimizers.SGD(learning_rate=0.1)
            optimizer.build(model.trainable_variables)
        return model, optimizer

    def state(model, optimizer):
        return {"iterations": int(optimizer.iterations.numpy())}

    runs = []
    for global_batch, seeds in ((64, (101, 102)), (33, (103, 104))):
        batches = {}
        for k, seed in enumerate(seeds):
            batch, split = _distribute(strategy, *_digits_like(global_batch, seed, 1.0 + 3.0 * k))
            even = "" if global_batch % replicas == 0 else ", uneven"
            batches[f"{'another' if k else 'a'} global batch of {global_batch} ({split} on "
                    f"{replicas} replica(s){even})"] = batch
        runs.append((global_batch, batches))

    cases = 0
    for global_batch, batches in runs:
        report = check_step(_bind(fn, strategy), _bind(_reference_distributed_step, strategy), build,
                            batches, args=(global_batch,), state=state, name=name,
                            rtol=1e-4, atol=1e-6)
        cases += report.cases
        if not report.ok:
            problems = list(report.problems)
            if cases > report.cases and all("differs" in p for p in problems):
                problems.append(f"it is right on global batches of 64 but not on {global_batch} "
                                f"examples: divide each replica's summed loss by the "
                                f"global_batch_size argument ({global_batch} here), not by a fixed "
                                f"number, and not by its own batch size x replicas (what Keras' "
                                f"default reduction does)")
            return Report(name=name, problems=problems, cases=cases)
    return Report(name=name, problems=[], cases=cases)


EXERCISES = {"replica_loss": replica_loss, "distributed_step": distributed_step}
