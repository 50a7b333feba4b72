"""What Bahdanau's and Luong's monotonic attention share (Raffel et al., 2017).

The energies come from the parent layer's score plus a learned scalar bias
`r`; a sigmoid turns each energy into the probability `p_ij` that step i
stops at memory position j. Training uses the expected alignment, computed
for all positions at once with cumulative sums and products; decoding uses
the hard process of the paper (stop at the first position, at or after the
previous step's, whose energy is positive), which reads the memory only up
to where it stops.
"""

import keras
import numpy as np
from keras import ops

from zoo.layers.base_attention import shapes_disagree
from zoo.layers.base_attention import static_shape
from zoo.layers.recurrence import run_over_steps

MODES = ("parallel", "hard")

# The floor of the exclusive cumprod that the parallel form divides by: a
# smaller one lets the quotient overflow float32 where the cumprod underflows.
CUMPROD_FLOOR = 1e-10


def safe_cumprod(x):
    """The exclusive cumulative product of `x` in (0, 1] over the last axis.

    Computed as `exp(cumsum(log(x)))`, with `x` floored at the smallest
    positive normal float32, the paper's numerically stable variant: its
    gradient never divides by a factor, whatever the backend's cumprod
    gradient does with factors of 0. Floored, not clipped to [tiny, 1]: a
    factor of exactly 1 (p = 0) sits on a clip's upper bound, where JAX
    halves the gradient. Exclusive: the first entry is 1, the j-th the
    product of the entries before j; Keras has no exclusive cumulative ops,
    so the log-cumsum is shifted by one.
    """
    logs = ops.cumsum(ops.log(ops.maximum(x, float(np.finfo("float32").tiny))), axis=-1)
    shifted = ops.concatenate([ops.zeros_like(logs[..., :1]), logs[..., :-1]], axis=-1)
    return ops.exp(shifted)


def monotonic_alignment(p_choose, previous_alignment, mode):
    """One step of monotonic attention over the last axis, in float32.

    Args:
        p_choose: `[batch, Tv]`, the probability of stopping at each memory
            position (0 or 1 in hard mode); 0 where the memory is masked.
        previous_alignment: `[batch, Tv]`, the previous step's alignment (a
            one-hot at position 0 before the first step).
        mode: `"parallel"`, the expected alignment
            `alpha_j = p_j prod_{k<j}(1 - p_k) sum_{k<=j} alpha'_k / prod_{l<k}(1 - p_l)`
            (eq. 9 solved in closed form, the paper's appendix C.1), or
            `"hard"`, a one-hot at the first position at or after the
            previous one where `p_choose` is 1 (all zeros where none is).

    Returns:
        The alignment `[batch, Tv]`, float32.
    """
    p_choose = ops.cast(p_choose, "float32")
    previous_alignment = ops.cast(previous_alignment, "float32")
    if mode == "hard":
        # Positions before the previous step's are out of reach; binary
        # values make the cumulative sums exact.
        reachable = ops.cast(ops.cumsum(previous_alignment, axis=-1) > 0, "float32")
        stops = p_choose * reachable
        no_stop_before = ops.cast(ops.cumsum(stops, axis=-1) - stops == 0, "float32")
        return stops * no_stop_before
    not_stopped = safe_cumprod(1.0 - p_choose)
    # A floor, not a clip to [floor, 1]: the product is 1 up to the first
    # p > 0, on a clip's upper bound, where JAX halves the gradient.
    carried = ops.cumsum(
        previous_alignment / ops.maximum(not_stopped, CUMPROD_FLOOR), axis=-1
    )
    return p_choose * not_stopped * carried


def _last_position(p_choose, value_mask):
    """`[batch, 1, Tv]`: 1 at each row's last unmasked memory position (the
    last position without a mask), 0 elsewhere and in fully masked rows."""
    length = ops.shape(p_choose)[2]
    if value_mask is None:
        last = ops.one_hot(ops.full((ops.shape(p_choose)[0],), length - 1, "int32"), length)
    else:
        count = ops.sum(ops.cast(value_mask, "int32"), axis=-1)
        # torch's one_hot rejects -1, so a fully masked row is zeroed after.
        last = ops.one_hot(ops.maximum(count - 1, 0), length)
        last = last * ops.cast(ops.expand_dims(count > 0, -1), last.dtype)
    return ops.expand_dims(ops.cast(last, "float32"), 1)


def validate_mode(mode, name="mode"):
    if mode not in MODES:
        raise ValueError(
            f"`{name}` must be one of {', '.join(repr(m) for m in MODES)}. "
            f"Received: {name}={mode!r}"
        )
    return mode


class MonotonicAttentionMixin:
    """Monotonic attention over the score of the attention layer it is mixed
    into (`AdditiveAttention` or `LuongAttention`); see the public layers'
    docstrings for the arguments."""

    def __init__(
        self,
        *args,
        mode="parallel",
        sigmoid_noise=0.0,
        sigmoid_noise_seed=None,
        score_bias_init=0.0,
        mass_preservation=False,
        **kwargs,
    ):
        probability_fn = kwargs.pop("probability_fn", "softmax")
        if probability_fn != "softmax":
            raise ValueError(
                "Monotonic attention turns each energy into a stop probability "
                "with a sigmoid, so it takes no `probability_fn`. Received: "
                f"probability_fn={probability_fn!r}"
            )
        super().__init__(*args, **kwargs)
        self.mode = validate_mode(mode)
        if isinstance(sigmoid_noise, bool) or not (
            isinstance(sigmoid_noise, (int, float)) and sigmoid_noise >= 0
        ):
            raise ValueError(
                "`sigmoid_noise` must be a float >= 0, the standard deviation "
                f"of the pre-sigmoid noise. Received: sigmoid_noise={sigmoid_noise!r}"
            )
        if isinstance(score_bias_init, bool) or not isinstance(score_bias_init, (int, float)):
            raise ValueError(
                "`score_bias_init` must be a float, the initial value of the "
                f"energy bias r. Received: score_bias_init={score_bias_init!r}"
            )
        self.sigmoid_noise = float(sigmoid_noise)
        self.sigmoid_noise_seed = sigmoid_noise_seed
        self.score_bias_init = float(score_bias_init)
        if not isinstance(mass_preservation, bool):
            raise ValueError(
                "`mass_preservation` must be a bool, whether each step stops at "
                "the last memory position at the latest. Received: "
                f"mass_preservation={mass_preservation!r}"
            )
        self.mass_preservation = mass_preservation
        if self.sigmoid_noise > 0:
            self._noise_seed_generator = keras.random.SeedGenerator(sigmoid_noise_seed)

    def build(self, query_shape, value_shape, key_shape=None):
        super().build(query_shape, value_shape, key_shape)
        self.attention_score_bias = self.add_weight(
            name="attention_score_bias",
            shape=(),
            initializer=keras.initializers.Constant(self.score_bias_init),
        )
        self.built = True

    def initial_alignment(self, batch_size, length):
        """The alignment before the first step: a one-hot at memory
        position 0, `[batch_size, length]` in the compute dtype."""
        return ops.one_hot(
            ops.zeros((batch_size,), "int32"), length, dtype=self.compute_dtype
        )

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        projected_key=None,
        previous_alignment=None,
        mode=None,
        energy_noise=None,
        return_attention_scores=False,
        training=None,
    ):
        mode = self.mode if mode is None else validate_mode(mode)
        single_step = len(query.shape) == 2
        expected = (query.shape[0], value.shape[1])
        shape = static_shape(previous_alignment)
        if shape is not None and shapes_disagree(shape, expected):
            raise ValueError(
                "`previous_alignment` must have shape [batch, Tv], "
                f"{list(expected)} here. Received: previous_alignment.shape={shape}"
            )
        step_mask = query_mask
        if step_mask is not None and single_step:
            step_mask = ops.expand_dims(step_mask, 1)
        return self._attend(
            query,
            value,
            key=key,
            query_mask=query_mask,
            value_mask=value_mask,
            projected_key=projected_key,
            return_attention_scores=return_attention_scores,
            training=training,
            previous_alignment=previous_alignment,
            step_mask=step_mask,
            mode=mode,
            add_noise=bool(training) and self.sigmoid_noise > 0,
            energy_noise=energy_noise,
        )

    @property
    def adds_noise_in_training(self):
        """Whether `call(..., training=True)` adds pre-sigmoid noise."""
        return self.sigmoid_noise > 0

    def draw_energy_noise(self, shape):
        """Standard-normal draws of `shape` from the layer's noise seed, for
        `call(..., energy_noise=)`."""
        return keras.random.normal(shape, seed=self._noise_seed_generator)

    def _attention_weights(
        self,
        query,
        projected_key,
        value_mask,
        previous_alignment,
        step_mask,
        mode,
        add_noise,
        energy_noise,
    ):
        energies = ops.cast(self._score(query, projected_key), "float32")
        energies = energies + ops.cast(self.attention_score_bias, "float32")
        if add_noise:
            if energy_noise is None:
                energy_noise = self.draw_energy_noise(ops.shape(energies))
            elif len(energy_noise.shape) == 2:
                energy_noise = ops.expand_dims(energy_noise, 1)
            energies = energies + self.sigmoid_noise * ops.cast(energy_noise, "float32")
        if mode == "hard":
            # The paper's test-time rule: stop where p > 0.5, i.e. energy > 0.
            p_choose = ops.cast(energies > 0, "float32")
        else:
            p_choose = ops.sigmoid(energies)
        if value_mask is not None:
            # A masked position can't be stopped at, so it gets zero weight
            # and the mass moves past it; a fully masked row gets zeros.
            p_choose = p_choose * ops.cast(ops.expand_dims(value_mask, 1), "float32")
        if self.mass_preservation:
            p_choose = ops.maximum(p_choose, _last_position(p_choose, value_mask))
        batch, length = ops.shape(p_choose)[0], ops.shape(p_choose)[2]
        if previous_alignment is None:
            previous_alignment = self.initial_alignment(batch, length)
        previous_alignment = ops.cast(previous_alignment, "float32")
        dtype = self.compute_dtype
        if query.shape[1] == 1:
            alignment = monotonic_alignment(p_choose[:, 0], previous_alignment, mode)
            return ops.cast(ops.expand_dims(alignment, 1), dtype)

        steps = ops.swapaxes(p_choose, 0, 1)  # [Tq, batch, Tv]
        if step_mask is not None:
            # The mask travels as an extra column of the one scanned sequence.
            keep = ops.cast(ops.swapaxes(step_mask, 0, 1), "float32")
            steps = ops.concatenate([steps, ops.expand_dims(keep, -1)], axis=-1)

        def one_step(alignment, step_input, t):
            if step_mask is None:
                new = monotonic_alignment(step_input, alignment, mode)
                return new, (new,)
            p, keep = step_input[..., :-1], step_input[..., -1:]
            new = monotonic_alignment(p, alignment, mode)
            # A masked query step attends nowhere and leaves the alignment
            # where it was for the next step, as a decoder's masked step does.
            return ops.where(keep > 0, new, alignment), (new * keep,)

        # TensorFlow gets the while loop that XLA compiles (`fit`'s default
        # on a GPU), as the decoders do by default.
        _, (alignments,) = run_over_steps(
            one_step, previous_alignment, steps, (length,), "float32",
            keras.backend.backend() == "tensorflow",
        )
        return ops.cast(ops.swapaxes(alignments, 0, 1), dtype)

    def get_config(self):
        config = super().get_config()
        del config["probability_fn"]  # always the sigmoid; see `__init__`
        config.update(
            {
                "mode": self.mode,
                "sigmoid_noise": self.sigmoid_noise,
                "sigmoid_noise_seed": self.sigmoid_noise_seed,
                "score_bias_init": self.score_bias_init,
                "mass_preservation": self.mass_preservation,
            }
        )
        return config
