"""Runtime set-up: seeds, device detection, strategy, precision policy, quick mode.

Read top to bottom:
  * ``Budget`` / ``budget``: quick mode (``CTLKIT_QUICK=1``) caps epochs, steps and
    example counts in one place, so notebooks carry no CI tricks in their text.
  * ``setup()``: seeds Python, NumPy and TensorFlow, optionally turns on op
    determinism, finds a TPU, GPUs or the CPU and returns a ``Runtime`` with the
    ``tf.distribute`` strategy to use and the precision policy we recommend.

Nothing here runs at import time: the first call to ``setup()`` does the work.
"""
from __future__ import annotations

import dataclasses
import os
import random
import sys

import numpy as np

from . import memory, validate
from . import tf32 as _tf32
from .devices import find_tpu, gpu_compute_capability, recommend_policy

QUICK_ENV = "CTLKIT_QUICK"
SEED_ENV = "CTLKIT_SEED"
BACKEND_ENV = "KERAS_BACKEND"
RUN_SEED_MAX = 1_000_000   # room for derived seeds (SEED + k, SEED * 1000 + k) below 2**32


@dataclasses.dataclass(frozen=True)
class Budget:
    """How much work a notebook may do. Full mode passes numbers through untouched.

    In quick mode (env ``CTLKIT_QUICK=1``, set by ``make test`` and CI) each request is
    capped, so the same notebook runs in seconds and its asserts still hold.
    """

    quick: bool = False
    max_epochs: int = 3
    max_steps: int = 300
    max_examples: int = 2000

    def __post_init__(self):
        object.__setattr__(self, "quick", validate.flag("quick", self.quick))
        for cap in ("max_epochs", "max_steps", "max_examples"):
            object.__setattr__(self, cap, validate.positive_int(cap, getattr(self, cap)))

    @classmethod
    def from_env(cls) -> Budget:
        return cls(quick=validate.env_flag(QUICK_ENV))

    def epochs(self, n: int) -> int:
        """Epochs to run: ``n``, or at most ``max_epochs`` in quick mode."""
        n = validate.positive_int("n", n)
        return min(n, self.max_epochs) if self.quick else n

    def steps(self, n: int) -> int:
        """Training steps to run: ``n``, or at most ``max_steps`` in quick mode."""
        n = validate.positive_int("n", n)
        return min(n, self.max_steps) if self.quick else n

    def examples(self, n: int) -> int:
        """Dataset size to use: ``n``, or at most ``max_examples`` in quick mode."""
        n = validate.positive_int("n", n)
        return min(n, self.max_examples) if self.quick else n

    def pick(self, full, quick):
        """Return ``quick`` in quick mode and ``full`` otherwise (for anything not a count)."""
        return quick if self.quick else full


def budget() -> Budget:
    """The budget in force now (re-read from the environment on each call)."""
    return Budget.from_env()


def run_seed() -> int:
    """The run's seed: ``CTLKIT_SEED`` if set, else 0 (re-read from the environment on each call).

    ``setup()`` without a seed uses it, and a notebook derives every other seed from
    ``rt.seed`` (``SEED + 1``, ...), so ``CTLKIT_SEED=3`` changes every random choice of a run:
    initial weights, data order, augmentations, noise, environment resets.
    """
    raw = os.environ.get(SEED_ENV)
    if raw is None or not raw.strip():
        return 0
    try:
        value = int(raw.strip())
    except ValueError:
        value = None
    if value is None or not 0 <= value <= RUN_SEED_MAX:
        raise ValueError(f"environment variable {SEED_ENV}={raw!r} is not a run seed: set it to "
                         f"an integer in [0, {RUN_SEED_MAX}] (e.g. {SEED_ENV}=3), or unset it "
                         f"for seed 0")
    return value


@dataclasses.dataclass
class Runtime:
    """What ``setup()`` found. ``strategy`` is always usable: ``with rt.strategy.scope(): ...``."""

    kind: str                      # "TPU", "GPU" or "CPU"
    strategy: object               # a tf.distribute.Strategy
    policy: str                    # recommended keras mixed-precision policy name
    devices: list                  # logical device names the strategy uses
    seed: int
    deterministic: bool
    quick: bool
    versions: dict
    memory_stats: bool = False     # allocator statistics available on the device (ctlkit.memory)
    seed_source: str = ""          # " (CTLKIT_SEED)" when the seed came from the environment
    compute_capability: tuple = ()  # (major, minor) per GPU; None where TensorFlow cannot tell
    tf32: bool = True              # tf.config.experimental.tensor_float_32_execution_enabled()
    memory_growth: str = ""        # GPUs: "on", or "off: <why>" (memory_growth_on_gpus)
    tf32_emulated: bool = False    # CTLKIT_EMULATE_TF32: TF32's rounding emulated (ctlkit.tf32)

    @property
    def replicas(self) -> int:
        return int(self.strategy.num_replicas_in_sync)

    def summary(self) -> str:
        v = self.versions
        lines = [
            f"TensorFlow {v['tensorflow']} · Keras {v['keras']} · Python {v['python']}",
            f"device: {self.kind} ({', '.join(self.devices)}) · strategy: "
            f"{type(self.strategy).__name__} · replicas: {self.replicas}",
            f"recommended precision policy: {self.policy} · seed: {self.seed}{self.seed_source} · "
            f"deterministic ops: {self.deterministic} · quick mode: {self.quick} · "
            f"memory stats: {'on' if self.memory_stats else 'off'}",
        ]
        if self.kind == "GPU":
            lines.append(f"GPU compute capability: {', '.join(_cc(c) for c in self.compute_capability)}"
                         f" · TF32: {tf32_words(self.tf32, self.compute_capability)}"
                         f" · memory growth: {self.memory_growth}")
        else:
            lines.append(f"TF32 switch: {'on' if self.tf32 else 'off'} (it matters on GPUs of "
                         f"compute capability 8.0 or newer, and on TPUs: off means full float32)")
        if self.tf32_emulated:
            when = ("even where the switch is off (force)" if _tf32.forced()
                    else "while the switch is on")
            lines.append(f"TF32 emulated ({_tf32.ENV}): {when}, float32 matmuls and "
                         f"convolutions round their inputs to 10 mantissa bits here too")
        return "\n".join(lines)

    def __repr__(self) -> str:  # shown when a notebook cell ends with rt
        return self.summary()


def _cc(capability) -> str:
    return "unknown" if not capability else ".".join(str(i) for i in capability)


def tf32_words(on: bool, capabilities) -> str:
    """What the TF32 switch means on these GPUs, in a few words. TensorFlow's own account
    (``enable_tensor_float_32_execution`` in tensorflow/python/framework/config.py): on by default,
    on GPUs it acts only on Ampere and newer (compute capability 8.0 or more in NVIDIA's
    numbering), rounds the float32 inputs of ops such as matmuls and convolutions to 10 mantissa
    bits "in most cases" (not for every shape), and still accumulates in float32; on TPUs, off
    means float32 ops at full precision."""
    ampere = [c for c in capabilities if c and tuple(c) >= (8, 0)]
    if not on:
        return "off (float32 matmuls and convolutions run in full float32)"
    if ampere:
        return ("on: float32 matmuls and convolutions may round their inputs to 10 mantissa bits "
                "(tf.config.experimental.enable_tensor_float_32_execution(False) turns it off)")
    if any(not c for c in capabilities):
        return ("on; TensorFlow reports no compute capability here, so whether it acts is unknown "
                "(it needs 8.0 or newer)")
    return "on, but no GPU here has TF32 (it needs compute capability 8.0 or newer)"


def memory_growth_on_gpus(gpus) -> str:
    """Ask TensorFlow to take GPU memory as it needs it, on every GPU in ``gpus``.

    By default a TensorFlow process maps nearly all of a GPU's memory when it starts, so a second
    process on the same GPU (another notebook, ``make test`` running two at a time, the GPU check
    started from a notebook) can fail with out-of-memory. Growth must be set before TensorFlow
    starts the GPUs, the same for all of them (tensorflow/python/eager/context.py,
    ``set_memory_growth``: a RuntimeError once they started, unless the value stays the same).
    Returns "on", or "off: <why>" when it could not be set."""
    import tensorflow as tf

    if not gpus:
        return "no GPU"
    for gpu in gpus:
        try:
            tf.config.experimental.set_memory_growth(gpu, True)
        except RuntimeError:   # TensorFlow started the GPUs with growth off: it cannot change now
            return ("off: TensorFlow started the GPU before setup(), so it holds nearly all of "
                    "its memory; restart the kernel and call ctlkit.setup() first")
        except ValueError as e:   # e.g. virtual devices configured on this GPU
            return f"off: TensorFlow refused it for {gpu.name}: {e}"
    return "on"


class BackendError(RuntimeError):
    """Keras runs on a backend other than TensorFlow: every notebook of the kit needs TensorFlow's."""


def keras_backend() -> str:
    """Import Keras and return its backend: "tensorflow", or a ``BackendError`` saying where the
    other one was chosen and how to undo it.

    Keras chooses once, when it is first imported: ``KERAS_BACKEND`` if set and not empty, else
    the "backend" entry of ``keras.json`` in ``KERAS_HOME`` (default ``~/.keras``), else
    "tensorflow" (``keras/src/backend/config.py`` on Keras 3.10-3.15). On another backend the
    notebooks' ``tf.GradientTape`` sees no Keras variables and the failures are far from the cause.
    """
    env = os.environ.get(BACKEND_ENV, "")
    try:
        import keras
    except ImportError as e:  # e.g. KERAS_BACKEND=jax where JAX is not installed
        if env and env != "tensorflow":
            raise BackendError(_backend_message(env, f"{BACKEND_ENV}={env} is set")) from e
        raise
    name = keras.backend.backend()
    if name == "tensorflow":
        return name
    if env:
        where = f"{BACKEND_ENV}={env} is set"
    else:
        from keras.src.backend import config

        where = f'"backend": "{name}" is in {os.path.join(config.keras_home(), "keras.json")}'
    raise BackendError(_backend_message(name, where))


def _backend_message(name: str, where: str) -> str:
    fix = (f"unset {BACKEND_ENV} (or export {BACKEND_ENV}=tensorflow) before starting Jupyter"
           if where.startswith(BACKEND_ENV) else
           f'write "backend": "tensorflow" in that file (or export {BACKEND_ENV}=tensorflow)')
    return (f"Keras runs on the {name!r} backend ({where}); every ctlkit notebook needs the "
            f"TensorFlow backend. Fix: {fix}, then restart the kernel: Keras reads its backend "
            f"once, when it is first imported. In a notebook alone: put "
            f"`import os; os.environ[{BACKEND_ENV!r}] = 'tensorflow'` at the top of the first "
            f"cell and restart the kernel.")


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy and TensorFlow (``keras.utils.set_random_seed``)."""
    seed = validate.seed(seed)
    import keras

    random.seed(seed)
    np.random.seed(seed)
    keras.utils.set_random_seed(seed)  # also seeds tf.random
    # Keras < 3.11 keeps its global SeedGenerator (keras.random without a seed, Dropout) across
    # set_random_seed; newer Keras drops it there. Drop it on every version, so reruns repeat.
    try:
        from keras.src.backend.common import global_state
    except ImportError:  # a Keras that moved it also resets the generator itself
        return
    global_state.set_global_attribute("global_seed_generator", None)  # its name in 3.10-3.15


def versions() -> dict:
    import keras
    import tensorflow as tf

    return {"tensorflow": tf.__version__, "keras": keras.__version__,
            "python": sys.version.split()[0], "numpy": np.__version__}


def split_cpu(n: int) -> None:
    """Split the CPU into ``n`` logical devices, so ``MirroredStrategy`` has replicas to mirror
    over on any machine. Must run before TensorFlow starts its devices (first cell)."""
    n = validate.positive_int("cpu_replicas", n, example=2)
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    current = tf.config.get_logical_device_configuration(cpu)
    if current is not None and len(current) == n:
        return
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(n)])
    except RuntimeError as e:
        have = len(tf.config.list_logical_devices("CPU"))
        raise RuntimeError(
            f"cpu_replicas={n} needs to be set before TensorFlow starts its devices, and this "
            f"process already runs with {have} logical CPU(s). Restart the kernel and call "
            f"ctlkit.setup(cpu_replicas={n}) before anything else touches TensorFlow.") from e


def _set_op_determinism(tf, on: bool) -> None:
    """Op determinism on or off, as asked: a second ``setup(deterministic=False)`` undoes the
    first's True instead of leaving it on behind a Runtime that says False.
    TensorFlow exports only ``enable_op_determinism``; the switch back and the state live in
    ``tensorflow/python/framework/config.py`` (``disable_op_determinism``,
    ``is_op_determinism_enabled``: lines 1108-1116 in TF 2.21, 1096-1104 in TF 2.19)."""
    if on:
        tf.config.experimental.enable_op_determinism()
        return
    from tensorflow.python.framework import config as tf_config
    is_on = getattr(tf_config, "is_op_determinism_enabled", None)
    if is_on is None or not is_on():
        return
    disable = getattr(tf_config, "disable_op_determinism", None)
    if disable is None:
        raise RuntimeError("op determinism is on (an earlier setup(deterministic=True)) and this "
                           "TensorFlow offers no way to turn it off: restart the kernel to run "
                           "without it, or pass deterministic=True")
    disable()


def setup(seed: int | None = None, deterministic: bool = False, verbose: bool = True,
          cpu_replicas: int | None = None, memory_stats: bool = True,
          memory_growth: bool = True, tf32: bool | None = None) -> Runtime:
    """Seed everything, pick the strategy and recommend a precision policy.

    seed:          seeds Python, NumPy and TensorFlow. None (the default): the run's seed,
                   ``CTLKIT_SEED`` or 0 (``run_seed()``); a seed given here wins over it.
    deterministic: also call ``tf.config.experimental.enable_op_determinism()`` (slower on
                   GPU, needed for bit-identical reruns there); False turns it off again if an
                   earlier setup() turned it on.
    verbose:       print the summary.
    cpu_replicas:  on a machine without GPU/TPU, split the CPU into this many logical devices
                   and return a ``MirroredStrategy`` over them (to learn tf.distribute anywhere).
    memory_stats:  choose TensorFlow's counting CPU allocator (``ctlkit.memory``) so that
                   allocator statistics exist on every CPU; only possible before TF's first op.
    memory_growth: on every GPU, take memory as needed (``tf.config.experimental.
                   set_memory_growth``) instead of nearly all of it at start, so two notebooks
                   (or two test processes) can share one GPU; only possible before TF starts
                   the GPU. The summary says whether it took.
    tf32:          None keeps TensorFlow's setting (TF32 on: on GPUs of compute capability 8.0+
                   float32 matmuls and convolutions may round their inputs to 10 mantissa bits);
                   False or True calls ``tf.config.experimental.enable_tensor_float_32_execution``.
                   The summary prints each GPU's compute capability and the switch.
                   Notebooks that compare float32 results at tight tolerances pass False.
    On one GPU (or one CPU) the strategy is the default one: a model built under
    ``OneDeviceStrategy`` gets no XLA from ``fit(jit_compile="auto")`` (Keras turns "auto" off
    under any strategy scope), so one device gets no strategy at all.
    The global Keras precision policy is *not* changed: notebooks set it themselves.
    Keras must run on the TensorFlow backend: any other raises ``BackendError`` with the fix.
    """
    keras_backend()
    deterministic = validate.flag("deterministic", deterministic)
    memory_stats = validate.flag("memory_stats", memory_stats)
    verbose = validate.flag("verbose", verbose)
    from_env = seed is None and bool(os.environ.get(SEED_ENV, "").strip())
    seed = run_seed() if seed is None else validate.seed(seed)
    memory_growth = validate.flag("memory_growth", memory_growth)
    if tf32 is not None:
        try:
            tf32 = validate.flag("tf32", tf32)
        except TypeError:
            raise TypeError(f"tf32 must be None (keep TensorFlow's setting), True or False, got "
                            f"{type(tf32).__name__} {tf32!r}") from None
    if cpu_replicas is not None:
        cpu_replicas = validate.positive_int("cpu_replicas", cpu_replicas, example=2)
    if memory_stats:
        memory.enable_cpu_stats()   # before seeding: set_random_seed starts TensorFlow
    import tensorflow as tf

    # listing physical devices does not start them: growth is set before the first op
    gpus = tf.config.list_physical_devices("GPU")
    growth = memory_growth_on_gpus(gpus) if memory_growth else "off (setup(memory_growth=False))"
    if tf32 is not None:
        tf.config.experimental.enable_tensor_float_32_execution(tf32)
    emulated = _tf32.enable_from_env()    # CTLKIT_EMULATE_TF32=1: an Ampere GPU's rounding, here
    seed_everything(seed)

    if cpu_replicas is not None and not tf.config.list_physical_devices("GPU"):
        split_cpu(cpu_replicas)

    _set_op_determinism(tf, deterministic)

    resolver = find_tpu()
    if resolver is not None:
        kind, strategy = "TPU", tf.distribute.TPUStrategy(resolver)
        policy = recommend_policy("TPU")
        devices = [d.name for d in tf.config.list_logical_devices("TPU")]
    elif gpus:
        kind = "GPU"
        logical = [d.name for d in tf.config.list_logical_devices("GPU")]
        strategy = (tf.distribute.MirroredStrategy() if len(logical) > 1
                    else tf.distribute.get_strategy())  # one GPU: default, keeps fit()'s XLA
        policy = recommend_policy("GPU", [gpu_compute_capability(g) for g in gpus])
        devices = logical
    else:
        kind, policy = "CPU", "float32"
        devices = [d.name for d in tf.config.list_logical_devices("CPU")]
        if cpu_replicas is not None and cpu_replicas > 1:
            devices = devices[:cpu_replicas]
            strategy = tf.distribute.MirroredStrategy(devices)
        else:
            strategy = tf.distribute.get_strategy()  # the default strategy: plain TF

    rt = Runtime(kind=kind, strategy=strategy, policy=policy, devices=devices, seed=int(seed),
                 deterministic=deterministic, quick=budget().quick, versions=versions(),
                 memory_stats=_has_memory_stats(devices[0]),
                 seed_source=f" ({SEED_ENV})" if from_env else "",
                 compute_capability=tuple(gpu_compute_capability(g) for g in gpus)
                 if kind == "GPU" else (),
                 tf32=bool(tf.config.experimental.tensor_float_32_execution_enabled()),
                 memory_growth=growth if kind == "GPU" else "", tf32_emulated=emulated)
    if verbose:
        print(rt.summary())
    return rt


def _has_memory_stats(device) -> bool:
    try:
        return memory.stats(device).available
    except (ValueError, TypeError):  # a device TensorFlow cannot query at all (e.g. some TPUs)
        return False
