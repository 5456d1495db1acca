"""Notebook 15's exercises: the reference solutions pass, and wrong answers of each kind are
rejected with a message that names the case where they go wrong (at least six per exercise,
some almost right)."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from exercise_helpers import rejected

from ctlkit.exercises import check


# -- 15.returns -----------------------------------------------------------------------------------
def _returns(reset_on="terminated", bootstrap_on="truncated", cut=True, discount="right",
             dtype=np.float32, value_index=0, order="terminated first"):
    """A returns function, right by default; each argument plants one mistake."""
    def fn(rewards, terminated, truncated, next_values, gamma):
        out = np.zeros(len(rewards), dtype)
        future = 0.0
        for t in reversed(range(len(rewards))):
            last = t == len(rewards) - 1
            nv = next_values[min(t + value_index, len(rewards) - 1)]
            ends = {"terminated": terminated[t], "nothing": False,
                    "either": terminated[t] or truncated[t]}[reset_on]
            boot = {"truncated": truncated[t], "nothing": False,
                    "either": terminated[t] or truncated[t]}[bootstrap_on] or (cut and last)
            if order == "truncated first" and truncated[t]:
                future = nv
            elif ends:
                future = 0.0
            elif boot:
                future = nv
            if discount == "right":
                future = rewards[t] + gamma * future
            elif discount == "gamma on the reward too":
                future = gamma * (rewards[t] + future)
            elif discount == "gamma squared":
                future = rewards[t] + gamma ** 2 * future
            out[t] = future
        return out
    return fn


def _vectorised(rewards, terminated, truncated, next_values, gamma):
    """A different but right way: the backward recursion with np.where on whole flags."""
    rewards, next_values = np.asarray(rewards, np.float64), np.asarray(next_values, np.float64)
    cut = np.zeros(len(rewards), bool)
    cut[-1] = True
    boot = (truncated | cut) & ~terminated
    future, out = 0.0, np.zeros(len(rewards))
    for t in range(len(rewards) - 1, -1, -1):
        future = np.where(terminated[t], 0.0, np.where(boot[t], next_values[t], future))
        future = rewards[t] + gamma * future
        out[t] = future
    return out.astype(np.float32)


def _tf_scan(rewards, terminated, truncated, next_values, gamma):
    """Right, in TensorFlow: tf.scan backwards over the stream, tf.where for the episode ends."""
    n = len(rewards)
    cut = tf.range(n) == n - 1
    boot = (tf.constant(truncated) | cut) & ~tf.constant(terminated)

    def back(future, step):
        reward, ended, bootstrap, value = step
        future = tf.where(ended, 0.0, tf.where(bootstrap, value, future))
        return reward + gamma * future
    return tf.scan(back, (tf.constant(rewards), tf.constant(terminated), boot,
                          tf.constant(next_values)), initializer=tf.constant(0.0), reverse=True)


RETURNS_RIGHT = {"a loop with a flag per case (the reference's style)": _returns(),
                 "np.where on the flags": _vectorised, "tf.scan backwards": _tf_scan}


RETURNS_WRONG = {
    "never resets at an episode's end: returns leak across episodes": (
        _returns(reset_on="nothing", bootstrap_on="nothing", cut=False), r"two episodes.*differs"),
    "bootstraps from a terminal state (every episode end bootstraps)": (
        _returns(reset_on="nothing", bootstrap_on="either"), r"terminates at its last step.*differs"),
    "treats a time-limit truncation as termination (no bootstrap)": (
        _returns(reset_on="either", bootstrap_on="nothing"), r"truncated by the time limit.*differs"),
    "forgets the cut at the rollout's end (almost right)": (
        _returns(cut=False), r"cut by the rollout's end.*differs"),
    "off-by-one discount: gamma also multiplies the reward": (
        _returns(discount="gamma on the reward too"), r"differs"),
    "off-by-one discount: gamma squared for the next return": (
        _returns(discount="gamma squared"), r"two episodes.*differs"),
    "terminated and truncated on one step: bootstraps (almost right)": (
        _returns(order="truncated first"), r"same step \(t=2\).*differs"),
    "uses the value of the state after next (an index off by one)": (
        _returns(value_index=1), r"differs"),
    "a float64 result": (_returns(dtype=np.float64), r"dtype float64, expected float32"),
}


@pytest.mark.parametrize("right", RETURNS_RIGHT)
def test_returns_right_in_other_styles_passes(right):
    report = check("15.returns", RETURNS_RIGHT[right])
    assert report.ok, str(report)


@pytest.mark.parametrize("wrong", RETURNS_WRONG)
def test_returns_wrong_answers_are_rejected(wrong):
    rejected("15.returns", *RETURNS_WRONG[wrong])


# -- 15.double_dqn_loss ---------------------------------------------------------------------------
def _double(picker="online", valuer="target", stop=True, done="terminated", gamma_power=1,
            pick="taken", loss="huber", reduce="mean", axis=-1):
    """A Double-DQN loss, right by default; each argument plants one mistake."""
    def fn(online, target, batch, gamma):
        nets = {"online": online, "target": target}
        if picker == "max":                 # plain DQN: max over the valuing network's Q-values
            next_value = tf.reduce_max(nets[valuer](batch["next_obs"]), axis=-1)
        else:
            best = tf.argmax(nets[picker](batch["next_obs"]), axis=axis)
            next_value = tf.reduce_sum(nets[valuer](batch["next_obs"]) * tf.one_hot(best, 2), axis=-1)
        ended = {"terminated": batch["terminated"], "nothing": 0.0,
                 "terminated or truncated": tf.maximum(batch["terminated"], batch["truncated"])}[done]
        y = batch["rewards"] + gamma ** gamma_power * (1.0 - ended) * next_value
        if stop:
            y = tf.stop_gradient(y)
        q = online(batch["obs"])
        q_sa = (tf.reduce_sum(q * tf.one_hot(batch["actions"], 2), axis=-1) if pick == "taken"
                else tf.reduce_max(q, axis=-1))
        err = y - q_sa
        per = (tf.where(tf.abs(err) <= 1.0, 0.5 * err ** 2, tf.abs(err) - 0.5) if loss == "huber"
               else err ** 2)
        return tf.reduce_mean(per) if reduce == "mean" else tf.reduce_sum(per)
    return fn


def _gather_and_keras_huber(online, target, batch, gamma):
    """Right, another style: tf.gather with batch_dims for both picks, Keras' Huber loss."""
    best = tf.argmax(online(batch["next_obs"]), axis=1, output_type=tf.int32)
    next_value = tf.gather(target(batch["next_obs"]), best, batch_dims=1)
    y = tf.stop_gradient(batch["rewards"] + gamma * (1.0 - batch["terminated"]) * next_value)
    q_sa = tf.gather(online(batch["obs"]), batch["actions"], batch_dims=1)
    return keras.losses.Huber()(y, q_sa)


def _keras_ops(online, target, batch, gamma):
    """Right, in keras.ops: take_along_axis, a mask for the future, the Huber formula by hand,
    and stop_gradient on the next Q-values only (the argmax carries no gradient anyway)."""
    ops = keras.ops
    next_q_online = online(batch["next_obs"])
    next_q_target = ops.stop_gradient(target(batch["next_obs"]))
    best = ops.expand_dims(ops.argmax(next_q_online, axis=-1), -1)
    next_value = ops.squeeze(ops.take_along_axis(next_q_target, best, axis=-1), -1)
    alive = ops.where(batch["terminated"] > 0.5, 0.0, 1.0)
    y = ops.stop_gradient(batch["rewards"] + gamma * alive * next_value)
    q_sa = ops.squeeze(ops.take_along_axis(online(batch["obs"]),
                                           ops.expand_dims(batch["actions"], -1), axis=-1), -1)
    err = ops.abs(y - q_sa)
    return ops.mean(ops.where(err <= 1.0, 0.5 * ops.square(err), err - 0.5))


def _loop_over_transitions(online, target, batch, gamma):
    """Right, the long way: one transition at a time in a Python loop, the target as a constant."""
    next_online, next_target = online(batch["next_obs"]), target(batch["next_obs"])
    q, huber, losses = online(batch["obs"]), keras.losses.Huber(delta=1.0), []
    for i in range(batch["actions"].shape[0]):
        a_next = tf.argmax(next_online[i])
        future = 0.0 if float(batch["terminated"][i]) == 1.0 else gamma * next_target[i][a_next]
        y = tf.stop_gradient(batch["rewards"][i] + future)
        losses.append(huber(y[None], q[i][batch["actions"][i]][None]))
    return tf.add_n(losses) / len(losses)


DOUBLE_RIGHT = {"one_hot and a Huber formula (the reference's style)": _double(),
                "tf.gather with batch_dims and keras.losses.Huber": _gather_and_keras_huber,
                "keras.ops: take_along_axis, where, the Huber formula": _keras_ops,
                "a Python loop over the transitions": _loop_over_transitions}


DOUBLE_WRONG = {
    "plain DQN: the max of the target network (the update cell copied)": (
        _double(picker="max", valuer="target"), r"plain DQN target"),
    "roles swapped: the target network picks, the online values (almost right)": (
        _double(picker="target", valuer="online"), r"roles swapped"),
    "the online network picks and values": (_double(picker="max", valuer="online"),
                                            r"online network alone"),
    "forgets the stop-gradient on the target (almost right)": (
        _double(stop=False), r"gradients flow into the target network's weights: wrap the TD target"),
    "bootstraps from terminal states": (_double(done="nothing"), r"bootstraps from terminal"),
    "plain DQN and no terminal masking": (_double(picker="max", done="nothing"),
                                          r"without terminal masking"),
    "treats truncation as the end (terminated or truncated)": (
        _double(done="terminated or truncated"), r"time-limit truncations.*treats time-limit"),
    "off-by-one discount: gamma squared": (_double(gamma_power=2), r"gamma squared"),
    "no discount at all": (_double(gamma_power=0), r"loss differs"),
    "max Q(s, .) instead of the action taken": (_double(pick="max"), r"loss differs"),
    "mean squared error instead of Huber": (_double(loss="mse"), r"matches the squared error"),
    "sum instead of mean": (_double(reduce="sum"), r"SUM over the batch"),
    "argmax over the batch axis": (_double(axis=0), r"raised|differs"),
    "per-example losses, not their mean": (
        lambda o, t, b, g: tf.square(b["rewards"] - tf.reduce_max(o(b["obs"]), -1)), r"shape \[32\]"),
    "a NumPy round trip breaks the gradient and the tf.function": (
        lambda o, t, b, g: tf.constant(_gather_and_keras_huber(o, t, b, g).numpy()),
        r"no gradient with respect to the online"),
}


def test_double_dqn_loss_reference_passes():
    assert check("15.double_dqn_loss", _double()).ok


@pytest.mark.parametrize("right", DOUBLE_RIGHT)
def test_double_dqn_loss_right_in_other_styles_passes(right):
    report = check("15.double_dqn_loss", DOUBLE_RIGHT[right])
    assert report.ok, str(report)


@pytest.mark.parametrize("wrong", DOUBLE_WRONG)
def test_double_dqn_loss_wrong_answers_are_rejected(wrong):
    rejected("15.double_dqn_loss", *DOUBLE_WRONG[wrong])


def test_double_dqn_cases_tell_the_picking_network_apart():
    """On the checker's batches the two networks pick different next actions often enough that
    the plain DQN target, or the roles swapped, change the loss well beyond its tolerance."""
    from ctlkit.exercises import nb15
    online, target = nb15._q_net(160), nb15._q_net(161, scale=3.0)
    for seed in (162, 163, 164, 165, 167):
        assert nb15._disagree(online, target, nb15._batch(seed)) >= 8
