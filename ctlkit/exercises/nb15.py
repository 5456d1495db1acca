"""Notebook 15, reinforcement learning: bootstrapped returns over episode ends, the Double-DQN
loss."""
from __future__ import annotations

import re

import numpy as np
import tensorflow as tf

from ..checks import Report, check_function, compare, explain


def _first(problems, n=3):
    """The first n problems, and how many more cases went wrong (they usually repeat them)."""
    more = len(problems) - n
    return problems[:n] + ([f"... and {more} more like these."] if more > 0 else [])


# -- 15.returns -----------------------------------------------------------------------------------
def _reference_returns(rewards, terminated, truncated, next_values, gamma):
    """G_t = r_t + gamma * G_{t+1} inside an episode; at a step whose episode ends by
    termination the future is worth 0; at a time-limit truncation, or at the last step of the
    stream (the rollout was cut), the future is estimated by next_values[t] = V(s_{t+1})."""
    out = np.zeros(len(rewards), np.float32)
    future = 0.0
    for t in reversed(range(len(rewards))):
        if terminated[t]:
            future = 0.0
        elif truncated[t] or t == len(rewards) - 1:
            future = float(next_values[t])
        future = float(rewards[t]) + gamma * future
        out[t] = future
    return out


def _stream(length, ends, seed, ones=False):
    """Rewards, terminated and truncated flags and next-state values for one env's stream.
    ends: {t: "terminated" | "truncated" | "both"}. The values are never 0 where an episode
    terminates (a critic predicts something there too), so using them shows."""
    rng = np.random.default_rng(seed)
    rewards = np.ones(length, np.float32) if ones else rng.uniform(-1, 2, length).astype(np.float32)
    terminated, truncated = np.zeros(length, bool), np.zeros(length, bool)
    for t, how in ends.items():
        terminated[t] = how in ("terminated", "both")
        truncated[t] = how in ("truncated", "both")
    next_values = rng.uniform(5, 50, length).astype(np.float32)
    return rewards, terminated, truncated, next_values


def returns(fn):
    """One env's stream of transitions, several episodes in a row: where each ends and how."""
    cases = {
        "one episode that terminates at its last step (no bootstrap anywhere)":
            (*_stream(6, {5: "terminated"}, 150, ones=True), 0.99),
        "two episodes: the first terminates at t=3, the second is cut by the rollout's end":
            (*_stream(8, {3: "terminated"}, 151), 0.99),
        "an episode truncated by the time limit at t=4, then one that terminates at t=9":
            (*_stream(10, {4: "truncated", 9: "terminated"}, 152), 0.99),
        "terminated and truncated on the same step (t=2): termination wins, no bootstrap":
            (*_stream(7, {2: "both", 6: "terminated"}, 153), 0.99),
        "gamma = 0.9, three episode ends of every kind":
            (*_stream(12, {2: "terminated", 5: "truncated", 8: "both"}, 154), 0.9),
        "gamma = 1 (undiscounted), the stream cut mid-episode":
            (*_stream(5, {1: "terminated"}, 155), 1.0),
        "a stream of one transition, cut (bootstrap from its next value)":
            (*_stream(1, {}, 156), 0.99),
        "a stream of one transition that terminates": (*_stream(1, {0: "terminated"}, 157), 0.99),
        "40 transitions of CartPole rewards (all 1), four episodes":
            (*_stream(40, {9: "terminated", 19: "truncated", 29: "terminated"}, 158, ones=True),
             0.99),
    }
    report = check_function(fn, _reference_returns, cases, name="bootstrapped_returns",
                            rtol=1e-5, atol=1e-4)
    return Report(name=report.name, problems=_first(report.problems), cases=report.cases)


# -- 15.double_dqn_loss ---------------------------------------------------------------------------
def _variant_loss(online, target, batch, gamma, picker="online", valuer="target",
                  done="terminated", reduce="mean", loss="huber", gamma_power=1):
    """The Double-DQN loss (by default), or one of the slips the checker can name: which network
    picks a' and which values it, what ends the future, the reduction, the loss."""
    import keras
    nets = {"online": online, "target": target}
    next_obs = batch["next_obs"]
    best = tf.argmax(nets[picker](next_obs), axis=-1, output_type=tf.int32)
    next_value = tf.gather(nets[valuer](next_obs), best, batch_dims=1)
    ended = {"terminated": batch["terminated"], "nothing": tf.zeros_like(batch["terminated"]),
             "either": tf.maximum(batch["terminated"], batch["truncated"])}[done]
    y = tf.stop_gradient(batch["rewards"] + gamma ** gamma_power * (1.0 - ended) * next_value)
    q = online(batch["obs"])
    q_taken = tf.reduce_sum(q * tf.one_hot(batch["actions"], q.shape[-1]), axis=-1)
    err = y - q_taken
    per = (keras.losses.Huber(delta=1.0, reduction=None)(y[:, None], q_taken[:, None])
           if loss == "huber" else tf.square(err))
    return tf.reduce_mean(per) if reduce == "mean" else tf.reduce_sum(per)


def _reference_double_dqn_loss(online, target, batch, gamma):
    """Double DQN (van Hasselt et al., 2016): the online network picks a', the target network
    values it; only `terminated` cuts the future; y is a constant; Huber (delta 1), the mean."""
    import keras
    next_obs = batch["next_obs"]
    best = tf.argmax(online(next_obs), axis=-1, output_type=tf.int32)     # picked by the online net
    next_value = tf.gather(target(next_obs), best, batch_dims=1)         # valued by the target net
    y = tf.stop_gradient(batch["rewards"] + gamma * (1.0 - batch["terminated"]) * next_value)
    q = online(batch["obs"])
    q_taken = tf.reduce_sum(q * tf.one_hot(batch["actions"], q.shape[-1]), axis=-1)
    return keras.losses.Huber(delta=1.0)(y, q_taken)


# (settings of _variant_loss, what that slip is): tried in order on a loss that differs
_DQN_SLIPS = [
    (dict(picker="target", valuer="target"),
     "It matches the plain DQN target, max_a' Q_target(s', a'): in Double DQN the ONLINE network "
     "picks a' = argmax_a' Q_online(s', a'), and the target network gives its value "
     "Q_target(s', a')."),
    (dict(picker="target", valuer="online"),
     "It matches the roles swapped: the target network picked a' and the online network valued it. "
     "The online network picks (argmax), the target network values."),
    (dict(picker="online", valuer="online"),
     "It matches a target taken from the online network alone (max_a' Q_online(s', a')): the "
     "online network picks a', but its value must come from the target network."),
    (dict(done="nothing"),
     "It matches a target that bootstraps from terminal states: multiply the next value by "
     "(1 - terminated), so an episode that really ended has no future."),
    (dict(done="either"),
     "It matches a target that treats time-limit truncation as an end: only `terminated` cuts "
     "the future; a truncated transition still bootstraps."),
    (dict(reduce="sum"),
     "It matches the SUM over the batch: take the mean of the per-transition losses."),
    (dict(loss="mse"),
     "It matches the squared error: use the Huber loss with delta = 1 (quadratic below 1, "
     "linear above)."),
    (dict(gamma_power=2),
     "It matches gamma squared in the target: the next value is discounted once, "
     "y = r + gamma * (1 - terminated) * Q_target(s', a')."),
    (dict(gamma_power=0),
     "It matches a target with no discount: multiply the next value by gamma."),
    (dict(picker="target", valuer="target", done="nothing"),
     "It matches the plain DQN target without terminal masking: two slips (Double DQN lets the "
     "online network pick a'; terminated transitions have no future)."),
]


_RATIO = re.compile(r"; yours is ([0-9.e+-]+) times the expected")


def _plain_ratio(sentence):
    """The sentence without compare's "yours is c times the expected" when c is no simple factor:
    two scalar losses always have some ratio, and 0.7185 names nothing."""
    m = _RATIO.search(sentence)
    if m:
        c = float(m[1])
        simple = any(abs(v - round(v)) < 1e-3 * v and round(v) >= 2 for v in (c, 1 / c))
        if not simple:
            sentence = sentence[:m.start()] + sentence[m.end():]
    return sentence


def _name_slip(fn_loss, net, tgt, batch, gamma):
    for settings, hint in _DQN_SLIPS:
        try:
            value = _variant_loss(net, tgt, batch, gamma, **settings)
        except Exception:  # a variant that cannot run is no match
            continue
        if np.allclose(np.asarray(fn_loss, np.float64), float(value), rtol=1e-5, atol=1e-6):
            return " " + hint
    return ""


def _q_net(seed, hidden=16, scale=1.0):
    """A small Q-network 4 -> 16 -> 2 with weights drawn from its own seed (no global seeding)."""
    import keras
    rng = np.random.default_rng(seed)
    net = keras.Sequential([keras.Input((4,)), keras.layers.Dense(hidden, activation="tanh"),
                            keras.layers.Dense(2)])
    net.set_weights([rng.normal(0, scale / np.sqrt(w.shape[0]) if w.ndim == 2 else 0.1,
                                w.shape).astype(np.float32) for w in net.get_weights()])
    return net


def _batch(seed, n=32, terminated=0.25, truncated=0.0, reward_scale=0.0):
    """A replay batch as the notebook's buffer returns it (float32 0/1 flags). Truncated
    transitions are not terminal; reward_scale > 0 adds rewards of several sizes."""
    rng = np.random.default_rng(seed)
    term = (rng.random(n) < terminated).astype(np.float32)
    trunc = ((rng.random(n) < truncated) & (term == 0)).astype(np.float32)
    rewards = 1.0 + reward_scale * rng.normal(size=n)
    return {"obs": tf.constant(rng.normal(0, 0.8, (n, 4)), tf.float32),
            "actions": tf.constant(rng.integers(0, 2, n), tf.int32),
            "rewards": tf.constant(rewards, tf.float32),
            "next_obs": tf.constant(rng.normal(0, 0.8, (n, 4)), tf.float32),
            "terminated": tf.constant(term), "truncated": tf.constant(trunc)}


def _loss_and_grads(fn, online, target, batch, gamma):
    """fn's loss, its gradients w.r.t. the online weights, and w.r.t. the target's (if apart)."""
    apart = target is not online
    with tf.GradientTape() as tape:
        loss = fn(online, target, batch, gamma)
    watched = online.trainable_variables + (target.trainable_variables if apart else [])
    grads = tape.gradient(loss, watched) if tf.is_tensor(loss) else [None] * len(watched)
    grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]
    n = len(online.trainable_variables)
    return loss, grads[:n], grads[n:]


def _try(fn, args, label):
    """(fn(*args), None), or (None, what went wrong as a sentence)."""
    try:
        return fn(*args), None
    except NotImplementedError as e:
        if not str(e).strip():           # the exercise cell's own bare `raise NotImplementedError`
            return None, f"{label}: not written yet (it raised NotImplementedError)."
        return None, f"{label}: raised {explain(e)}"
    except Exception as e:  # the learner's error is the message
        return None, f"{label}: raised {explain(e)}"


def _disagree(online, target, batch):
    """How many next states the two networks would pick different actions in."""
    a = tf.argmax(online(batch["next_obs"]), axis=-1)
    b = tf.argmax(target(batch["next_obs"]), axis=-1)
    return int(tf.reduce_sum(tf.cast(a != b, tf.int32)))


def double_dqn_loss(fn):
    # online and target with other weights: on many next states they pick different actions,
    # so the network that picks and the one that values both show in the loss
    online, target = _q_net(160), _q_net(161, scale=3.0)
    cases = {
        "a batch with terminal transitions (terminated = 1), a separate target network":
            (online, target, _batch(162, terminated=0.3), 0.99),
        "a batch with time-limit truncations (truncated = 1, terminated = 0): they bootstrap":
            (online, target, _batch(163, terminated=0.1, truncated=0.4), 0.99),
        "gamma = 0.9, rewards of several sizes (TD errors on both sides of Huber's delta = 1)":
            (online, target, _batch(164, terminated=0.2, reward_scale=3.0), 0.9),
        "no terminal transitions, gamma = 0.5": (online, target, _batch(165, terminated=0.0), 0.5),
        "right after a sync: the target network is the online network itself":
            (online, online, _batch(166, terminated=0.2), 0.99),
    }
    problems, named = [], set()
    for label, (net, tgt, batch, gamma) in cases.items():
        want, want_grads, _ = _loss_and_grads(_reference_double_dqn_loss, net, tgt, batch, gamma)
        out, err = _try(_loss_and_grads, (fn, net, tgt, batch, gamma), label)
        if err:
            problems.append(err)
            if "not written yet" in err:
                break
            continue
        got, got_grads, target_grads = out
        case = compare(got, want, where=f"{label}: the loss", rtol=1e-5, atol=1e-6)
        if case and np.shape(got) == ():
            hint = _name_slip(got, net, tgt, batch, gamma)
            case = [_plain_ratio(case[0]).rstrip(".") + "." + ("" if hint in named else hint)]
            named.add(hint)                          # a slip is named once, on its first case
        if not case and any(g is None for g in got_grads):
            case = [f"{label}: the loss has no gradient with respect to the online network's "
                    f"weights (was Q(s, a) computed with TensorFlow ops from online(obs)?)."]
        if not case:
            for k, (g, w) in enumerate(zip(got_grads, want_grads)):
                case += compare(g, w, where=f"{label}: the gradient w.r.t. online weight {k}",
                                rtol=1e-4, atol=1e-6)
            if case and tgt is net:
                case = [f"{label}: the loss is right but its gradient is not: the TD target "
                        f"y must be a constant (tf.stop_gradient), or the step also pushes "
                        f"the target towards Q(s, a)."]
        if not case and any(g is not None for g in target_grads):
            case = [f"{label}: gradients flow into the target network's weights: wrap the TD "
                    f"target in tf.stop_gradient (it is a label, not something to train)."]
        problems += case[:2]
    if not problems:                      # the notebook calls it inside a compiled step
        label = "inside a tf.function"
        batch = _batch(167, terminated=0.3)
        out, err = _try(tf.function(fn), (online, target, batch, 0.99), label)
        want = _reference_double_dqn_loss(online, target, batch, 0.99)
        problems += [err] if err else compare(out, want, where=f"{label}: the loss",
                                             rtol=1e-5, atol=1e-6)
    return Report(name="double_dqn_loss", problems=_first(problems), cases=len(cases) + 1)


EXERCISES = {"returns": returns, "double_dqn_loss": double_dqn_loss}
