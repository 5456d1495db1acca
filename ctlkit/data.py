"""Offline data as ``tf.data`` pipelines, and sample images.

    splits = ctlkit.data.load("digits", batch_size=64)   # works with no network
    for x, y in splits.train: ...                          # float32 in [0, 1], int32 labels

"digits" (scikit-learn's 8x8 digits, shipped with the package) is the default.
"mnist" and "fashion_mnist" go through Keras' real download code; offline they fall
back to digits with a printed reason (``fallback=True``) or raise ``DatasetUnavailable``.
Never a hang: a 3-second reachability probe runs before any download.
"""
from __future__ import annotations

import dataclasses
import os
import socket
import threading

import numpy as np

from . import validate
from .runtime import budget, run_seed

DATASETS = ("digits", "mnist", "fashion_mnist")
IMAGES = ("astronaut", "chelsea", "coffee", "rocket", "hubble_deep_field", "brick", "grass",
          "gravel", "grace_hopper")
_DOWNLOAD_HOST = ("storage.googleapis.com", 443)  # where keras.datasets fetches from


class DatasetUnavailable(RuntimeError):
    """A dataset needs a download and the machine is offline."""


@dataclasses.dataclass
class Splits:
    train: object                  # tf.data.Dataset of (x, y) batches, shuffled each epoch
    val: object
    test: object
    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    name: str                      # the dataset actually loaded
    source: str                    # where it came from, for the reader
    num_classes: int = 10

    @property
    def input_shape(self) -> tuple:
        return tuple(self.x_train.shape[1:])

    def __repr__(self) -> str:
        return (f"Splits({self.name}: train {len(self.x_train)}, val {len(self.x_val)}, "
                f"test {len(self.x_test)}, input {self.input_shape}, from {self.source})")


def online(timeout: float = 3.0) -> bool:
    """Can Keras' dataset host be reached? (False on CI and offline laptops.)

    The probe runs in a daemon thread so a slow DNS lookup (which ignores the socket
    timeout) cannot make this take longer than ``timeout`` seconds.
    """
    timeout = validate.number("timeout", timeout, low=0, low_open=True, example=3.0)
    result = []

    def probe():
        try:
            socket.create_connection(_DOWNLOAD_HOST, timeout=timeout).close()
            result.append(True)
        except OSError:
            result.append(False)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(result and result[0])


def _keras_cache(name: str) -> str:
    base = os.environ.get("KERAS_HOME", os.path.join(os.path.expanduser("~"), ".keras"))
    fname = "mnist.npz" if name == "mnist" else "fashion-mnist"
    return os.path.join(base, "datasets", fname)


def available() -> dict:
    """{dataset: how it would load here} without downloading anything."""
    out = {"digits": "offline (scikit-learn)"}
    net = None
    for name in ("mnist", "fashion_mnist"):
        if os.path.exists(_keras_cache(name)):
            out[name] = "cached (~/.keras/datasets)"
        else:
            net = online() if net is None else net
            out[name] = "downloadable" if net else "offline: falls back to digits"
    return out


def _digits():
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[..., None]  # (n, 8, 8, 1) in [0, 1]
    return x, d.target.astype(np.int32), "scikit-learn 8x8 digits (offline)"


def _keras_download(name: str):
    import keras

    if not os.path.exists(_keras_cache(name)) and not online():
        raise DatasetUnavailable(
            f"{name} must be downloaded and this machine is offline. Use "
            f"ctlkit.data.load('digits') (ships offline), or run where the internet is "
            f"reachable (Colab) once so Keras caches it in ~/.keras/datasets.")
    module = keras.datasets.mnist if name == "mnist" else keras.datasets.fashion_mnist
    try:
        (xa, ya), (xb, yb) = module.load_data()  # the real download code
    except Exception as e:  # a broken cache or download, said and left in place
        raise DatasetUnavailable(
            f"{name}: Keras could not read or download it ({type(e).__name__}: {e}). If "
            f"{_keras_cache(name)} exists it may be damaged (an interrupted download): delete it "
            f"and load again where the internet is reachable, or use ctlkit.data.load('digits')."
        ) from e
    x = np.concatenate([xa, xb]).astype(np.float32)[..., None] / 255.0
    return x, np.concatenate([ya, yb]).astype(np.int32), f"keras.datasets.{name}"


def arrays(name: str = "digits", *, fallback: bool = True):
    """(x, y, source): all examples as float32 in [0, 1] with a channel axis, int32 labels."""
    if not isinstance(name, str) or name not in DATASETS:
        raise ValueError(f"name must be one of {DATASETS}, got {name!r}")
    fallback = validate.flag("fallback", fallback)
    if name == "digits":
        return _digits()
    try:
        return _keras_download(name)
    except DatasetUnavailable as e:
        if not fallback:
            raise
        print(f"[ctlkit.data] {e}\n[ctlkit.data] Falling back to 'digits'.")
        return _digits()


def _check_fraction(arg, value):
    try:
        return validate.number(arg, value, low=0, high=0.5, low_open=True, high_open=True)
    except (TypeError, ValueError) as e:
        raise type(e)(f"{arg} must be a fraction between 0 and 0.5 (both excluded), got "
                      f"{value!r}; pass e.g. {arg}=0.1") from None


def load(name: str = "digits", *, batch_size: int = 64, val_fraction: float = 0.1,
         test_fraction: float = 0.2, flatten: bool = False, max_examples: int | None = None,
         seed: int | None = None, fallback: bool = True) -> Splits:
    """Stratified train/val/test splits as batched ``tf.data`` pipelines.

    seed:         the splits and the shuffle order; None: the run's seed (``ctlkit.run_seed()``,
                  ``CTLKIT_SEED`` or 0), so another run seed gives other splits.
    flatten:      give vectors (n, 64) instead of images (n, 8, 8, 1).
    max_examples: use at most this many examples (quick mode caps it further).
    """
    import tensorflow as tf
    from sklearn.model_selection import train_test_split

    batch_size = validate.positive_int("batch_size", batch_size, example=64)
    val_fraction = _check_fraction("val_fraction", val_fraction)
    test_fraction = _check_fraction("test_fraction", test_fraction)
    if max_examples is not None:
        max_examples = validate.positive_int("max_examples", max_examples, example=1000)
    seed = run_seed() if seed is None else validate.seed(seed)
    flatten, fallback = validate.flag("flatten", flatten), validate.flag("fallback", fallback)
    x, y, source = arrays(name, fallback=fallback)
    loaded = "digits" if source.startswith("scikit") else name
    limit = budget().examples(max_examples or len(x))
    try:
        if limit < len(x):
            x, _, y, _ = train_test_split(x, y, train_size=limit, stratify=y, random_state=seed)
        x_rest, x_test, y_rest, y_test = train_test_split(
            x, y, test_size=test_fraction, stratify=y, random_state=seed)
        x_train, x_val, y_train, y_val = train_test_split(
            x_rest, y_rest, test_size=val_fraction / (1 - test_fraction), stratify=y_rest,
            random_state=seed)
    except ValueError as e:  # too few examples for a stratified split
        raise ValueError(f"max_examples={max_examples} leaves {limit} examples, too few to split "
                         f"into train/val/test with every class in each ({e}); pass a larger "
                         f"max_examples or larger val_fraction/test_fraction") from e
    if flatten:
        x_train, x_val, x_test = (a.reshape(len(a), -1) for a in (x_train, x_val, x_test))

    def pipe(xs, ys, shuffle):
        ds = tf.data.Dataset.from_tensor_slices((xs, ys))
        if shuffle:
            ds = ds.shuffle(len(xs), seed=seed, reshuffle_each_iteration=True)
        return ds.batch(batch_size).prefetch(tf.data.AUTOTUNE)

    return Splits(train=pipe(x_train, y_train, True), val=pipe(x_val, y_val, False),
                  test=pipe(x_test, y_test, False), x_train=x_train, y_train=y_train,
                  x_val=x_val, y_val=y_val, x_test=x_test, y_test=y_test, name=loaded,
                  source=source, num_classes=int(y.max()) + 1)


def image(name: str = "chelsea", size: int | None = 256) -> np.ndarray:
    """A sample RGB image as float32 (H, W, 3) in [0, 1], shipped offline.

    size: resize so the longer side is ``size`` pixels (None keeps the original).
    """
    if not isinstance(name, str) or name not in IMAGES:
        raise ValueError(f"name must be one of {IMAGES}, got {name!r}")
    if size is not None:
        try:
            size = validate.integer("size", size, minimum=8, example=256)
        except (TypeError, ValueError) as e:
            raise type(e)(f"{e} (or size=None for the original size)") from None
    if name == "grace_hopper":
        import matplotlib.cbook

        with matplotlib.cbook.get_sample_data("grace_hopper.jpg") as f:
            import matplotlib.image

            img = matplotlib.image.imread(f, format="jpg")
    else:
        import skimage.data

        img = getattr(skimage.data, name)()
    img = np.asarray(img, dtype=np.float32)
    if img.max() > 1.0:
        img = img / 255.0
    if img.ndim == 2:
        img = np.stack([img] * 3, axis=-1)
    img = img[..., :3]
    if size is not None:
        from skimage.transform import resize

        h, w = img.shape[:2]
        scale = size / max(h, w)
        img = resize(img, (max(1, round(h * scale)), max(1, round(w * scale))),
                     anti_aliasing=True).astype(np.float32)
    return np.clip(img, 0.0, 1.0)
