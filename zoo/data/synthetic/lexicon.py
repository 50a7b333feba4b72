"""The synthetic corpus's two vocabularies: the source word lists, and the
fixed lexicon of pseudo-words that translates them (`TARGET_LEXICON`)."""

from __future__ import annotations

import dataclasses
import hashlib

DETERMINERS = ("the", "a", "this", "every")

NOUNS = (
    # animals
    "dog", "cat", "horse", "bird", "fish", "cow", "sheep", "goat", "mouse",
    "wolf", "fox", "bear", "rabbit",
    # people
    "man", "woman", "child", "boy", "girl", "teacher", "doctor", "farmer",
    "baker", "painter", "sailor", "soldier", "king", "queen", "student",
    "friend",
    # places
    "house", "garden", "river", "tree", "flower", "forest", "lake",
    "mountain", "road", "bridge", "village", "city", "field",
    # things
    "car", "boat", "ship", "train", "book", "letter", "table", "chair",
    "window", "door", "key", "lamp", "cup", "bottle", "box", "ball", "hat",
    "coat",
)  # fmt: skip

ADJECTIVES = (
    "big", "small", "old", "young", "red", "blue", "green", "black", "white",
    "happy", "sad", "quiet", "loud", "tall", "short", "heavy", "light",
    "dark", "bright", "warm", "cold", "new", "brave", "clever", "lazy",
    "strange", "famous", "gentle", "angry", "tired",
)  # fmt: skip

TRANSITIVE_VERBS = (
    "sees", "likes", "finds", "follows", "carries", "helps", "paints",
    "watches", "meets", "hears", "buys", "sells", "opens", "builds",
    "visits", "catches",
)  # fmt: skip

INTRANSITIVE_VERBS = (
    "sleeps", "runs", "waits", "laughs", "sings", "dances", "swims", "falls",
    "smiles", "works",
)  # fmt: skip

# Verbs of saying: the only verbs that take a "that" clause.
SPEECH_VERBS = ("says", "knows", "thinks", "believes", "hopes")

PREPOSITIONS = (
    "with", "near", "behind", "under", "on", "in", "without", "beside",
)  # fmt: skip

CONJUNCTIONS = ("and", "because", "that")

GENDERS = ("m", "f", "n")

# Gender endings of target determiners and verbs.
_GENDER_SUFFIX = {"m": "o", "f": "a", "n": "e"}

# Target determiner stems: the determiner is stem + gender suffix.
_DETERMINER_STEMS = {"the": "d", "a": "un", "this": "est", "every": "ogn"}

# Function words are written by hand, so that they read as function words.
_TARGET_FUNCTION_WORDS = {
    "with": "kon",
    "near": "pres",
    "behind": "tras",
    "under": "sub",
    "on": "sur",
    "in": "im",
    "without": "sen",
    "beside": "jux",
    "and": "ku",
    "because": "vel",
    "that": "ke",
}

_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"


@dataclasses.dataclass(frozen=True)
class TargetLexicon:
    """The fixed word-by-word lexicon of the synthetic target language.

    Attributes:
        nouns: source noun -> target noun.
        genders: source noun -> "m", "f" or "n".
        adjectives: source adjective -> target adjective.
        verbs: source verb -> {gender: inflected target verb}.
        determiners: source determiner -> {gender: target determiner}.
        function_words: source preposition or conjunction -> target word.
    """

    nouns: dict
    genders: dict
    adjectives: dict
    verbs: dict
    determiners: dict
    function_words: dict

    def target_words(self):
        """Every word of the target language, as a set (without ".")."""
        words = set(self.nouns.values()) | set(self.adjectives.values())
        words |= set(self.function_words.values())
        for table in (self.verbs, self.determiners):
            for forms in table.values():
                words |= set(forms.values())
        return words

    def source_words(self):
        """Every word of the source language, as a set (without ".")."""
        return (
            set(self.nouns)
            | set(self.adjectives)
            | set(self.verbs)
            | set(self.determiners)
            | set(self.function_words)
        )


def _pseudo_word(key, ending, used):
    """A two-syllable word from a hash of `key`, plus `ending`; not in `used`.

    `ending=None` ends the word with a consonant drawn from the hash too.
    Hashing the source word (not drawing in list order) keeps every other
    word's translation when a word is added to a list.
    """
    attempt = 0
    while True:
        digest = hashlib.sha256(f"{key}:{attempt}".encode()).digest()
        letters = []
        for i in range(2):
            letters.append(_CONSONANTS[digest[2 * i] % len(_CONSONANTS)])
            letters.append(_VOWELS[digest[2 * i + 1] % len(_VOWELS)])
        if ending is None:
            letters.append(_CONSONANTS[digest[-1] % len(_CONSONANTS)])
        else:
            letters.append(ending)
        word = "".join(letters)
        if word not in used:
            used.add(word)
            return word
        attempt += 1


def _build_lexicon():
    used = set(_TARGET_FUNCTION_WORDS.values())
    determiners = {
        det: {g: stem + _GENDER_SUFFIX[g] for g in GENDERS}
        for det, stem in _DETERMINER_STEMS.items()
    }
    for forms in determiners.values():
        used |= set(forms.values())
    nouns = {}
    genders = {}
    for index, noun in enumerate(NOUNS):
        # Nouns end in a consonant, adjectives in "l", verbs in a gender
        # vowel: the classes look different, as in a natural language.
        nouns[noun] = _pseudo_word(f"noun:{noun}", None, used)
        genders[noun] = GENDERS[index % len(GENDERS)]
    adjectives = {
        adj: _pseudo_word(f"adjective:{adj}", "l", used) for adj in ADJECTIVES
    }
    verbs = {}
    for verb in TRANSITIVE_VERBS + INTRANSITIVE_VERBS + SPEECH_VERBS:
        stem = _pseudo_word(f"verb:{verb}", None, used)
        verbs[verb] = {g: stem + _GENDER_SUFFIX[g] for g in GENDERS}
    lexicon = TargetLexicon(
        nouns=nouns,
        genders=genders,
        adjectives=adjectives,
        verbs=verbs,
        determiners=determiners,
        function_words=dict(_TARGET_FUNCTION_WORDS),
    )
    # Distinct target words make the translation of each word unambiguous.
    n_target = len(NOUNS) + len(ADJECTIVES) + 3 * len(verbs) + 3 * len(DETERMINERS)
    n_target += len(_TARGET_FUNCTION_WORDS)
    n_source = len(NOUNS) + len(ADJECTIVES) + len(verbs) + len(DETERMINERS)
    n_source += len(PREPOSITIONS) + len(CONJUNCTIONS)
    sizes = (len(lexicon.source_words()), len(lexicon.target_words()))
    if sizes != (n_source, n_target):
        raise AssertionError("the synthetic lexicon has a duplicate word")
    return lexicon


TARGET_LEXICON = _build_lexicon()
