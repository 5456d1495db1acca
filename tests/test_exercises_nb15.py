"""Notebook 15's exercises: the reference solutions pass, and wrong answers of each kind are
rejected with a message that names the case where they go wrong (at least six per exercise,
some almost right)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from ctlkit.exercises import check
from exercise_helpers import rejected


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


def test_returns_reference_passes():
    assert check("15.returns", _returns()).ok
    assert check("15.returns", _vectorised).ok


@pytest.mark.parametrize("wrong", RETURNS_WRONG)
def test_returns_wrong_answers_are_rejected(wrong):
    rejected("15.returns", *RETURNS_WRONG[wrong])


# -- 15.dqn_loss ----------------------------------------------------------------------------------
def _dqn_loss(next_net="target", stop=True, done="terminated", gamma_power=1, pick="taken",
              loss="huber", reduce="mean", double=False):
    """A DQN loss, right by default; each argument plants one mistake."""
    def fn(online, target, batch, gamma):
        bootstrap_net = {"target": target, "online": online}[next_net]
        next_q = bootstrap_net(batch["next_obs"])
        if double:                      # Double DQN: online picks, target evaluates
            best = tf.argmax(online(batch["next_obs"]), axis=-1)
            next_value = tf.reduce_sum(next_q * tf.one_hot(best, 2), axis=-1)
        else:
            next_value = tf.reduce_max(next_q, axis=-1)
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


def _with_keras_huber(online, target, batch, gamma):
    """A different but right way: tf.gather for Q(s, a) and Keras' Huber loss."""
    y = tf.stop_gradient(batch["rewards"] + gamma * (1.0 - batch["terminated"])
                         * tf.reduce_max(target(batch["next_obs"]), axis=-1))
    q_sa = tf.gather(online(batch["obs"]), batch["actions"], batch_dims=1)
    return keras.losses.Huber()(y, q_sa)


DQN_WRONG = {
    "uses the online network for the target": (_dqn_loss(next_net="online"), r"separate target.*loss differs"),
    "forgets the stop-gradient on the target (almost right)": (
        _dqn_loss(stop=False), r"gradients flow into the target|target network is the online.*stop_gradient"),
    "online network for the target and no stop-gradient": (
        _dqn_loss(next_net="online", stop=False), r"loss differs"),
    "bootstraps from terminal states": (_dqn_loss(done="nothing"), r"terminal transitions.*loss differs"),
    "treats truncation as the end (terminated or truncated)": (
        _dqn_loss(done="terminated or truncated"), r"time-limit truncations.*loss differs"),
    "off-by-one discount: gamma squared": (_dqn_loss(gamma_power=2), r"loss differs"),
    "no discount at all": (_dqn_loss(gamma_power=0), r"loss differs"),
    "max Q(s, .) instead of the action taken": (_dqn_loss(pick="max"), r"loss differs"),
    "mean squared error instead of Huber": (_dqn_loss(loss="mse"), r"several sizes.*loss differs"),
    "sum instead of mean": (_dqn_loss(reduce="sum"), r"loss differs"),
    "Double DQN's target (not the one asked for)": (_dqn_loss(double=True), r"loss differs"),
    "per-example losses, not their mean": (
        lambda o, t, b, g: tf.square(b["rewards"] - tf.reduce_max(o(b["obs"]), -1)), r"shape \[32\]"),
    "a NumPy round trip breaks the gradient and the tf.function": (
        lambda o, t, b, g: tf.constant(_with_keras_huber(o, t, b, g).numpy()),
        r"no gradient with respect to the online"),
}


def test_dqn_loss_reference_passes():
    assert check("15.dqn_loss", _dqn_loss()).ok
    assert check("15.dqn_loss", _with_keras_huber).ok


@pytest.mark.parametrize("wrong", DQN_WRONG)
def test_dqn_loss_wrong_answers_are_rejected(wrong):
    rejected("15.dqn_loss", *DQN_WRONG[wrong])
