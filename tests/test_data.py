"""Tests for ctlkit/data.py: offline digits, splits, fallback when offline, images, probes."""
import os
import socket
import time

import numpy as np
import pytest
import tensorflow as tf

from ctlkit import data
from ctlkit.runtime import Budget

N_DIGITS = 1797  # scikit-learn's 8x8 digits


@pytest.fixture(scope="module")
def digits():
    return data.load("digits", batch_size=32)


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """No network and an empty Keras cache: mnist must fall back or raise, never download."""
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    monkeypatch.setattr(data, "online", lambda timeout=3.0: False)
    return tmp_path


def _rows(x):
    x = x.reshape(len(x), -1)
    return x[np.lexsort(x.T[::-1])]


# -- digits: arrays and splits -------------------------------------------------------------------
def test_arrays_digits_offline():
    x, y, source = data.arrays("digits")
    assert x.shape == (N_DIGITS, 8, 8, 1) and x.dtype == np.float32
    assert y.shape == (N_DIGITS,) and y.dtype == np.int32
    assert x.min() == 0.0 and x.max() == 1.0
    assert set(np.unique(y)) == set(range(10))
    assert "scikit-learn" in source


def test_load_shapes_dtypes_and_range(digits):
    for xs, ys in [(digits.x_train, digits.y_train), (digits.x_val, digits.y_val),
                   (digits.x_test, digits.y_test)]:
        assert xs.shape[1:] == (8, 8, 1) and xs.dtype == np.float32
        assert ys.dtype == np.int32 and len(xs) == len(ys)
        assert xs.min() >= 0.0 and xs.max() <= 1.0
    assert digits.input_shape == (8, 8, 1)
    assert digits.num_classes == 10
    assert digits.name == "digits" and "scikit-learn" in digits.source


def test_load_split_sizes_add_up_and_follow_fractions(digits):
    n_train, n_val, n_test = len(digits.x_train), len(digits.x_val), len(digits.x_test)
    assert n_train + n_val + n_test == N_DIGITS
    assert abs(n_test - 0.2 * N_DIGITS) <= 1
    assert abs(n_val - 0.1 * N_DIGITS) <= 1


def test_load_splits_are_a_partition_of_the_dataset(digits):
    # Disjoint and complete: the rows of the three splits, as a multiset, are exactly the dataset
    # (compared as a multiset because the digits data holds a few duplicate images).
    x_all, _, _ = data.arrays("digits")
    together = np.concatenate([digits.x_train, digits.x_val, digits.x_test])
    np.testing.assert_array_equal(_rows(together), _rows(x_all))


def test_load_splits_are_stratified(digits):
    overall = np.bincount(data.arrays("digits")[1], minlength=10) / N_DIGITS
    for ys in (digits.y_train, digits.y_val, digits.y_test):
        frac = np.bincount(ys, minlength=10) / len(ys)
        assert np.abs(frac - overall).max() < 0.02


def test_load_pipelines_batch_and_match_arrays(digits):
    x, y = next(iter(digits.train))
    assert x.shape == (32, 8, 8, 1) and x.dtype == tf.float32 and y.dtype == tf.int32
    xv = np.concatenate([b.numpy() for b, _ in digits.val])
    np.testing.assert_array_equal(xv, digits.x_val)  # val/test are not shuffled
    yt = np.concatenate([b.numpy() for _, b in digits.test])
    np.testing.assert_array_equal(yt, digits.y_test)
    n_train = sum(int(b.shape[0]) for b, _ in digits.train)
    assert n_train == len(digits.x_train)


def test_train_pipeline_reshuffles_each_epoch(digits):
    first = [next(iter(digits.train))[1].numpy() for _ in range(2)]
    assert not np.array_equal(first[0], first[1])


def test_load_is_reproducible_per_seed():
    a, b, c = (data.load("digits", seed=s) for s in (0, 0, 1))
    np.testing.assert_array_equal(a.x_train, b.x_train)
    np.testing.assert_array_equal(a.y_test, b.y_test)
    assert not np.array_equal(a.y_train, c.y_train)


def test_load_flatten(digits):
    flat = data.load("digits", batch_size=32, flatten=True)
    assert flat.x_train.shape == (len(digits.x_train), 64) and flat.input_shape == (64,)
    assert flat.x_test.shape[1:] == (64,) and flat.x_val.shape[1:] == (64,)
    np.testing.assert_array_equal(flat.x_train, digits.x_train.reshape(-1, 64))
    assert next(iter(flat.train))[0].shape == (32, 64)


def test_load_max_examples_is_a_stratified_subset():
    s = data.load("digits", max_examples=500)
    total = len(s.x_train) + len(s.x_val) + len(s.x_test)
    assert total == 500
    assert set(np.unique(s.y_test)) == set(range(10))


def test_load_max_examples_larger_than_dataset_uses_all():
    s = data.load("digits", max_examples=10**6)
    assert len(s.x_train) + len(s.x_val) + len(s.x_test) == N_DIGITS


def test_load_quick_mode_caps_examples(monkeypatch):
    monkeypatch.setattr(data, "budget", lambda: Budget(quick=True, max_examples=300))
    s = data.load("digits")
    assert len(s.x_train) + len(s.x_val) + len(s.x_test) == 300
    s = data.load("digits", max_examples=200)  # below the cap: passes through
    assert len(s.x_train) + len(s.x_val) + len(s.x_test) == 200
    monkeypatch.setattr(data, "budget", lambda: Budget(quick=False, max_examples=300))
    s = data.load("digits")
    assert len(s.x_train) + len(s.x_val) + len(s.x_test) == N_DIGITS


def test_splits_repr(digits):
    r = repr(digits)
    assert "digits" in r and f"train {len(digits.x_train)}" in r and "(8, 8, 1)" in r


# -- bad input -----------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["cifar10", "MNIST", "", None, 3])
def test_unknown_dataset_name(bad):
    with pytest.raises(ValueError, match=r"name must be one of"):
        data.load(bad)
    with pytest.raises(ValueError, match=r"name must be one of"):
        data.arrays(bad)


@pytest.mark.parametrize("bad", [0, -1, 2.5, "64", True, None])
def test_bad_batch_size(bad):
    with pytest.raises((TypeError, ValueError), match=r"batch_size must be a positive int"):
        data.load("digits", batch_size=bad)


@pytest.mark.parametrize("arg", ["val_fraction", "test_fraction"])
@pytest.mark.parametrize("bad", [0, 0.0, 0.5, 0.9, -0.1, 1, "0.1", None])
def test_bad_fractions(arg, bad):
    with pytest.raises((TypeError, ValueError), match=rf"{arg} must be a fraction between 0 and 0.5"):
        data.load("digits", **{arg: bad})


@pytest.mark.parametrize("bad", [0, -1, -500])
def test_bad_max_examples_value(bad):
    with pytest.raises(ValueError, match=r"max_examples must be a positive int, got"):
        data.load("digits", max_examples=bad)


@pytest.mark.parametrize("bad", [2.5, "100", True])
def test_bad_max_examples_type(bad):
    with pytest.raises(TypeError, match=r"max_examples must be a positive int"):
        data.load("digits", max_examples=bad)


@pytest.mark.parametrize("tiny", [1, 9, 30])
def test_max_examples_too_small_to_stratify(tiny):
    with pytest.raises(ValueError, match=rf"max_examples={tiny} leaves {tiny} examples, too few"):
        data.load("digits", max_examples=tiny)


@pytest.mark.parametrize("bad", [-1, 1.5, "0", np.int64(-1)])
def test_bad_seed(bad):
    with pytest.raises((TypeError, ValueError), match=r"seed must be a non-negative int"):
        data.load("digits", seed=bad)


def test_the_splits_follow_the_run_seed_unless_a_seed_is_given(monkeypatch):
    monkeypatch.setenv("CTLKIT_SEED", "0")
    first = data.load("digits").y_test
    np.testing.assert_array_equal(first, data.load("digits", seed=0).y_test)
    monkeypatch.setenv("CTLKIT_SEED", "5")
    assert not np.array_equal(first, data.load("digits").y_test)     # another run seed, other splits
    np.testing.assert_array_equal(first, data.load("digits", seed=0).y_test)   # a given seed wins


# -- mnist / fashion_mnist when offline ----------------------------------------------------------
@pytest.mark.parametrize("name", ["mnist", "fashion_mnist"])
def test_offline_falls_back_to_digits_with_a_message(offline, capsys, name):
    x, y, source = data.arrays(name)
    out = capsys.readouterr().out
    assert f"{name} must be downloaded and this machine is offline" in out
    assert "Falling back to 'digits'" in out
    assert x.shape == (N_DIGITS, 8, 8, 1) and "scikit-learn" in source
    s = data.load(name)
    assert s.name == "digits" and s.input_shape == (8, 8, 1)


@pytest.mark.parametrize("name", ["mnist", "fashion_mnist"])
def test_offline_without_fallback_raises_quickly(offline, name):
    t0 = time.perf_counter()
    with pytest.raises(data.DatasetUnavailable, match=rf"{name} must be downloaded .* offline"):
        data.load(name, fallback=False)
    with pytest.raises(data.DatasetUnavailable, match=r"ctlkit.data.load\('digits'\)"):
        data.arrays(name, fallback=False)
    assert time.perf_counter() - t0 < 10


def test_dataset_unavailable_is_a_runtime_error():
    assert issubclass(data.DatasetUnavailable, RuntimeError)


def test_keras_cache_path_follows_keras_home(monkeypatch, tmp_path):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    assert data._keras_cache("mnist") == str(tmp_path / "datasets" / "mnist.npz")
    assert data._keras_cache("fashion_mnist") == str(tmp_path / "datasets" / "fashion-mnist")


# -- available() ---------------------------------------------------------------------------------
def test_available_offline_no_cache(offline):
    assert data.available() == {"digits": "offline (scikit-learn)",
                                "mnist": "offline: falls back to digits",
                                "fashion_mnist": "offline: falls back to digits"}


def test_available_probes_the_network_once(monkeypatch, tmp_path):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    calls = []
    monkeypatch.setattr(data, "online", lambda timeout=3.0: calls.append(1) or True)
    out = data.available()
    assert out["mnist"] == out["fashion_mnist"] == "downloadable"
    assert len(calls) == 1


def test_available_sees_the_cache(offline):
    (offline / "datasets").mkdir()
    (offline / "datasets" / "mnist.npz").write_bytes(b"")
    out = data.available()
    assert out["mnist"].startswith("cached")
    assert out["fashion_mnist"] == "offline: falls back to digits"
    assert set(out) == set(data.DATASETS)


# -- online(): a bounded probe -------------------------------------------------------------------
def test_online_true_when_host_listens(monkeypatch):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    try:
        monkeypatch.setattr(data, "_DOWNLOAD_HOST", server.getsockname())
        assert data.online(timeout=2.0) is True
    finally:
        server.close()


def test_online_false_when_refused(monkeypatch):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    monkeypatch.setattr(data, "_DOWNLOAD_HOST", ("127.0.0.1", port))
    t0 = time.perf_counter()
    assert data.online(timeout=2.0) is False
    assert time.perf_counter() - t0 < 2.5


def test_online_is_bounded_even_when_dns_hangs(monkeypatch):
    # getaddrinfo ignores the socket timeout; the probe must not wait for it.
    def slow_dns(*args, **kwargs):
        time.sleep(3)
        raise socket.gaierror("slow resolver")

    monkeypatch.setattr(socket, "getaddrinfo", slow_dns)
    t0 = time.perf_counter()
    assert data.online(timeout=0.3) is False
    assert time.perf_counter() - t0 < 1.5


# -- image() -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["chelsea", "astronaut", "brick", "grace_hopper"])
def test_image_offline_rgb_float_in_range(name):
    img = data.image(name, size=64)
    assert img.dtype == np.float32 and img.ndim == 3 and img.shape[2] == 3
    assert max(img.shape[:2]) == 64
    assert img.min() >= 0.0 and img.max() <= 1.0
    assert img.max() - img.min() > 0.1  # a picture, not a blank


def test_image_grayscale_becomes_three_equal_channels():
    img = data.image("brick", size=32)
    np.testing.assert_array_equal(img[..., 0], img[..., 1])
    np.testing.assert_array_equal(img[..., 0], img[..., 2])


def test_image_keeps_aspect_ratio_and_original_size():
    orig = data.image("chelsea", size=None)
    assert orig.shape == (300, 451, 3) and orig.dtype == np.float32
    small = data.image("chelsea", size=100)
    assert small.shape == (67, 100, 3)
    assert abs(small.mean() - orig.mean()) < 0.02


def test_every_listed_image_loads_offline():
    for name in data.IMAGES:
        img = data.image(name, size=16)
        assert max(img.shape[:2]) == 16 and img.shape[2] == 3, name


@pytest.mark.parametrize("bad", ["lena", "Chelsea", "", None, 1])
def test_image_unknown_name(bad):
    with pytest.raises(ValueError, match=r"name must be one of"):
        data.image(bad)


@pytest.mark.parametrize("bad", [0, -1, 4, 7, 64.0, "64", True])
def test_image_bad_size(bad):
    with pytest.raises((TypeError, ValueError), match=r"size must be an int >= 8.*or size=None"):
        data.image("chelsea", size=bad)


def test_constants():
    assert data.DATASETS[0] == "digits"
    assert {"chelsea", "astronaut", "grace_hopper"} <= set(data.IMAGES)
    assert os.path.basename(data._keras_cache("mnist")) == "mnist.npz"


# -- hostile inputs (issue 12): every spelling of a number, and refusals that name the fix --------
@pytest.mark.parametrize("size", [np.int64(64), np.array(64), 64])
def test_image_size_accepts_numpy_ints(size):
    assert data.image("astronaut", size=size).shape[:2] == (64, 64)


@pytest.mark.parametrize("size, err", [(7, ValueError), (64.0, TypeError), ("64", TypeError),
                                       (True, TypeError), ([64], TypeError), (float("nan"), TypeError)])
def test_image_size_refusals_name_the_argument_and_none(size, err):
    with pytest.raises(err, match=r"size must be an int >= 8.*size=None"):
        data.image("astronaut", size=size)


@pytest.mark.parametrize("name", [None, 3, "", "CHELSEA", ["chelsea"]])
def test_image_and_arrays_refuse_unknown_names(name):
    with pytest.raises(ValueError, match="name must be one of"):
        data.image(name)
    with pytest.raises(ValueError, match="name must be one of"):
        data.arrays(name)


@pytest.mark.parametrize("kwargs, match", [
    (dict(batch_size=np.int64(0)), "batch_size must be a positive int"),
    (dict(val_fraction=float("nan")), "val_fraction must be a fraction"),
    (dict(test_fraction=np.float32(0.7)), "test_fraction must be a fraction"),
    (dict(flatten="yes"), "flatten must be True or False"),
    (dict(fallback=1), "fallback must be True or False"),
    (dict(max_examples=np.float64(100)), "max_examples must be a positive int"),
])
def test_load_hostile_arguments(kwargs, match):
    with pytest.raises((TypeError, ValueError), match=match):
        data.load("digits", **kwargs)


def test_load_accepts_numpy_and_tensor_numbers():
    import tensorflow as tf

    splits = data.load("digits", batch_size=np.int64(32), val_fraction=np.float32(0.1),
                       max_examples=tf.constant(400), seed=np.int32(1))
    x, _ = next(iter(splits.train))
    assert x.shape[0] == 32


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), "3", None])
def test_online_refuses_bad_timeouts(timeout):
    with pytest.raises((TypeError, ValueError), match="timeout must be"):
        data.online(timeout)


def test_a_seed_too_large_is_reported_as_a_seed_problem_not_max_examples():
    with pytest.raises(ValueError, match=r"^seed must be at most"):
        data.load("digits", seed=2**40, max_examples=500)


@pytest.mark.parametrize("name", ["mnist", "fashion_mnist"])
def test_a_damaged_keras_cache_falls_back_to_digits_with_the_reason(offline, name, monkeypatch, capsys):
    import zipfile

    import keras

    cache = data._keras_cache(name)
    os.makedirs(os.path.dirname(cache), exist_ok=True)
    with open(cache, "wb") as f:
        f.write(b"half a download")                        # exists, so no offline short cut

    def damaged():
        raise zipfile.BadZipFile("File is not a zip file")   # what np.load says of such a file
    module = keras.datasets.mnist if name == "mnist" else keras.datasets.fashion_mnist
    monkeypatch.setattr(module, "load_data", damaged)
    x, y, source = data.arrays(name)
    out = capsys.readouterr().out
    assert "BadZipFile: File is not a zip file" in out and cache in out and "delete it" in out
    assert "Falling back to 'digits'" in out and "scikit-learn" in source
    with pytest.raises(data.DatasetUnavailable, match=r"could not read or download it"):
        data.arrays(name, fallback=False)
    assert os.path.exists(cache)                             # the user's file is left as it was
