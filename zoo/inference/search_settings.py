"""`SearchSettings`: the arguments of one decoding search (beam width,
n-best list, GNMT penalties, stopping rule, step limit), checked in one
place with one-line errors.

The command line (`zoo translate`, `zoo evaluate`, `zoo caption`, `zoo
export`), `Translator` and `Captioner`, the SavedModel export and the ONNX
export all take their search arguments through it. Keras-free (it imports
only `zoo.errors`), so the command line checks them before Keras loads.
Two checks stay outside, each for a reason: `zoo.recipes.decoding`'s own
(`beam_search` is public and below `zoo`, which it may not import) and
`zoo.export.onnx_runner`'s (the runner runs without this package).
"""

import numbers
from dataclasses import dataclass
from dataclasses import replace
from typing import ClassVar
from typing import Optional

from zoo.errors import ZooUserError

# `zoo.recipes.decoding.STOPPING_RULES`, repeated so that the checks and the
# command line's parsers need no Keras (a test holds the two together).
STOPPING_RULES = ("early", "exact")


class SearchSettingsError(ZooUserError):
    """A search argument out of its range, in one line."""


@dataclass(frozen=True)
class SearchSettings:
    """The checked arguments of one search; a bad one raises
    `SearchSettingsError` (a `ValueError`) on construction.

    Attributes:
        beam: int >= 1, the beam width; 1 is greedy search.
        length_penalty: float >= 0, GNMT's alpha (beam search only).
        coverage_penalty: float >= 0, GNMT's beta (beam search only).
        stopping: beam search's rule, one of `STOPPING_RULES` (see
            `zoo.recipes.decoding.beam_search`).
        n_best: int from 0 to `beam`, the hypotheses returned per input
            (0: none, the best one only).
        max_length: None, or int >= 1: the most steps decoded (a
            captioner's training `max_length`); None leaves the step limit
            to `zoo.recipes.decoding.max_decoding_steps`.
    """

    beam: int = 1
    length_penalty: float = 0.6
    coverage_penalty: float = 0.0
    stopping: str = "early"
    n_best: int = 0
    max_length: Optional[int] = None

    # How the error messages name each argument; the command line's subclass
    # names its flags instead.
    NAMES: ClassVar[dict] = {}

    def __post_init__(self):
        self._set("beam", self._integer("beam", self.beam, 1))
        for name in ("length_penalty", "coverage_penalty"):
            self._set(name, self._number(name, getattr(self, name)))
        if not isinstance(self.stopping, str) or self.stopping not in STOPPING_RULES:
            self._refuse("stopping", f"must be one of {', '.join(STOPPING_RULES)}", self.stopping)
        self._set("n_best", self._integer("n_best", self.n_best, 0))
        if self.n_best > self.beam:
            n_best, beam = self._name("n_best"), self._name("beam")
            raise SearchSettingsError(
                f"{n_best} {self.n_best} needs {beam} {self.n_best} or more "
                f"(got {beam} {self.beam})"
            )
        if self.max_length is not None:
            self._set("max_length", self._integer("max_length", self.max_length, 1))

    @classmethod
    def checked(cls, error, **arguments):
        """`cls(**arguments)`, a bad argument raised as `error` (a command's
        or an export's own one-line error class) with the same message."""
        try:
            return cls(**arguments)
        except SearchSettingsError as mistake:
            raise error(str(mistake)) from None

    @property
    def search_key(self):
        """The settings that give the same search: without `n_best` (read
        from the search's result), and greedy search without the beam's
        options, which it ignores."""
        if self.beam == 1:
            return SearchSettings(max_length=self.max_length)
        return SearchSettings(
            self.beam, self.length_penalty, self.coverage_penalty, self.stopping, 0, self.max_length
        )

    def beam_search_arguments(self):
        """The keyword arguments of `zoo.recipes.decoding.beam_search` (and
        `ChunkedBeamSearch`) for these settings."""
        return {
            "beam_width": self.beam,
            "length_penalty": self.length_penalty,
            "coverage_penalty": self.coverage_penalty,
            "max_length": self.max_length,
            "stopping": self.stopping,
        }

    def _name(self, name):
        return self.NAMES.get(name, name)

    def _refuse(self, name, requirement, value):
        raise SearchSettingsError(f"{self._name(name)} {requirement}; received {value!r}")

    def _set(self, name, value):
        object.__setattr__(self, name, value)  # frozen: the normalized value

    def _integer(self, name, value, least):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
            self._refuse(name, f"must be an int >= {least}", value)
        return int(value)

    def _number(self, name, value):
        # `not value >= 0` refuses NaN too.
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= 0:
            self._refuse(name, "must be a number >= 0", value)
        return float(value)
