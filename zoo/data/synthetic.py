"""An embedded synthetic parallel corpus, generated in code from a seed.

Over 500 lines: the grammar, its lexicon and the rendering of both languages
are one generator, and most of the length is the grammar's documentation.

Pure Python (standard library only), so it runs with every Keras backend and
needs no files and no download. The corpus is small enough that a small model
learns it in minutes, yet it has the phenomena that make translation need
attention: reordering, long-distance agreement, and sentences from 5 to 60
words.

The source language (English-like)
----------------------------------
::

    sentence    := clause ("and" clause)* "."
    clause      := np VERB [np] pp{0,2} [subordinate]
    subordinate := "because" subclause | "that" subclause
    subclause   := np VERB [np] pp{0,2}             (no further nesting)
    np          := DET ADJ{0,2} NOUN [PREP np']      (np' has no pp)
    pp          := PREP np'

A clause with a "that" clause takes a verb of saying (says, knows, thinks,
believes, hopes) and no object; otherwise a clause with an object takes a
transitive verb and one without takes an intransitive verb. Every subject is
singular. The lexicon has 60 nouns, 30 adjectives, 31 verbs, 4 determiners,
8 prepositions and 3 conjunctions (136 source words).

The target language
-------------------
Every word is translated by a fixed lexicon of pseudo-words (built from
syllables, the same for every seed), and the grammar differs in three ways:

(a) Adjectives follow the noun, in mirror order: "the big red dog" becomes
    "DET dog red big".
(b) In a subordinate clause (after "that" or "because") the verb moves to
    the end of the clause, after its object and prepositional phrases, as in
    German: "because the dog sees the cat in the garden" becomes
    "because the dog the cat in the garden sees".
(c) Every noun has a grammatical gender (masculine, feminine or neuter,
    given in turn along the noun list). A determiner takes the form of its
    noun's gender (the: do/da/de, a: uno/una/une, this: esto/esta/este,
    every: ogno/ogna/ogne), and the verb of each clause takes the suffix of
    the gender of its *subject's head noun* (-o, -a, -e). The verb can sit
    many words after that noun, with other nouns of other genders between
    them (a prepositional phrase on the subject, and in a subordinate clause
    the object and the prepositional phrases too), so the right suffix needs
    information from far away.

Sentence lengths (words, not counting the final period, which is attached to
the last word as in ordinary text) are drawn uniformly from
`[min_length, max_length]`, 5 to 60 by default, so every 10-word bucket used
by BLEU-by-length is well populated. Each sentence is grown to its drawn
length by adding adjectives, objects, prepositional phrases, subordinate and
coordinated clauses at random.

Example: `synthetic_corpus(400, seed=0, min_length=10, max_length=16)[365]`::

    source: a    sad  queen near this bird helps  the boat
    target: une  queen sad  near this bird helps-e the boat
            une  nutim lisul pres esto guvek tulone da ponis

    source: because the student paints a   white fish
    target: because the student a   fish white paints-o
            vel     do  rozar   una telos gelol degeko.

"queen" is neuter (une, -e) and "bird" masculine (esto): "tulone" agrees
with "queen", five words back, not with "bird" just before it; in the
"because" clause "degeko" moved to the end and agrees with the masculine
"student" (do), not with the feminine "fish" (una) next to it. The lexicon
is `TARGET_LEXICON` (206 target words).

Since the generator knows which source word each target word translates,
it can give every pair's gold word alignment too (`with_alignments=True`),
against which `zoo evaluate` scores a model's attention (alignment error
rate); the pairs are the same with or without it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random

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


# --- the phrase structure --------------------------------------------------


@dataclasses.dataclass
class _NounPhrase:
    determiner: str
    adjectives: list
    noun: str
    attachment: tuple | None = None  # (preposition, _NounPhrase) or None


@dataclasses.dataclass
class _Clause:
    subject: _NounPhrase
    is_subordinate: bool
    obj: _NounPhrase | None = None
    phrases: list = dataclasses.field(default_factory=list)  # [(prep, np)]
    subordinate: tuple | None = None  # (conjunction, _Clause) or None
    verb: str | None = None


_MAX_ADJECTIVES = 2
_MAX_PHRASES = 2
_MAX_MAIN_CLAUSES = 6

# How many source words each way of growing a sentence adds.
_COSTS = {
    "adjective": 1,  # ADJ
    "object": 2,  # DET NOUN
    "phrase": 3,  # PREP DET NOUN, on the clause
    "attachment": 3,  # PREP DET NOUN, on the subject or the object
    "subordinate": 4,  # because/that DET NOUN VERB
    "coordinate": 4,  # and DET NOUN VERB
}


def _new_np(rng):
    return _NounPhrase(rng.choice(DETERMINERS), [], rng.choice(NOUNS))


def _new_clause(rng, is_subordinate):
    return _Clause(_new_np(rng), is_subordinate)


def _clauses(main_clauses):
    for clause in main_clauses:
        yield clause
        if clause.subordinate is not None:
            yield clause.subordinate[1]


def _noun_phrases(main_clauses):
    for clause in _clauses(main_clauses):
        phrases = [clause.subject, clause.obj] + [np for _, np in clause.phrases]
        for np in phrases:
            if np is None:
                continue
            yield np
            if np.attachment is not None:
                yield np.attachment[1]


def _expansions(main_clauses, budget):
    """The ways to grow the sentence within `budget` words: {kind: [apply]}."""
    options = {}

    def offer(kind, apply):
        if _COSTS[kind] <= budget:
            options.setdefault(kind, []).append(apply)

    for np in _noun_phrases(main_clauses):
        if len(np.adjectives) < _MAX_ADJECTIVES:
            offer("adjective", lambda rng, np=np: _add_adjective(rng, np))
    for clause in _clauses(main_clauses):
        has_that = clause.subordinate is not None and clause.subordinate[0] == "that"
        if clause.obj is None and not has_that:
            offer("object", lambda rng, c=clause: setattr(c, "obj", _new_np(rng)))
        if len(clause.phrases) < _MAX_PHRASES:
            offer("phrase", lambda rng, c=clause: c.phrases.append(_new_pp(rng)))
        for np in (clause.subject, clause.obj):
            if np is not None and np.attachment is None:
                offer("attachment", lambda rng, np=np: _attach_pp(rng, np))
        if not clause.is_subordinate and clause.subordinate is None:
            offer("subordinate", lambda rng, c=clause: _add_subordinate(rng, c))
    if len(main_clauses) < _MAX_MAIN_CLAUSES:
        offer("coordinate", lambda rng: main_clauses.append(_new_clause(rng, False)))
    return options


def _attach_pp(rng, np):
    np.attachment = _new_pp(rng)


def _add_adjective(rng, np):
    choices = [a for a in ADJECTIVES if a not in np.adjectives]
    np.adjectives.append(rng.choice(choices))


def _new_pp(rng):
    return (rng.choice(PREPOSITIONS), _new_np(rng))


def _add_subordinate(rng, clause):
    # A "that" clause needs a verb of saying, which takes no object.
    if clause.obj is not None:
        conjunction = "because"
    else:
        conjunction = rng.choice(("because", "that"))
    clause.subordinate = (conjunction, _new_clause(rng, is_subordinate=True))


def _choose_verbs(rng, main_clauses):
    for clause in _clauses(main_clauses):
        if clause.subordinate is not None and clause.subordinate[0] == "that":
            clause.verb = rng.choice(SPEECH_VERBS)
        elif clause.obj is not None:
            clause.verb = rng.choice(TRANSITIVE_VERBS)
        else:
            clause.verb = rng.choice(INTRANSITIVE_VERBS)


def _grow_sentence(rng, length):
    """Main clauses whose source has exactly `length` words (without ".")."""
    while True:  # a dead end (no expansion fits the last words) starts over
        main_clauses = [_new_clause(rng, is_subordinate=False)]
        budget = length - 3
        while budget > 0:
            options = _expansions(main_clauses, budget)
            if not options:
                break
            kind = rng.choice(sorted(options))
            rng.choice(options[kind])(rng)
            budget -= _COSTS[kind]
        if budget == 0:
            _choose_verbs(rng, main_clauses)
            return main_clauses


# --- rendering ---------------------------------------------------------------


# Each renderer gives `(word, key)` pairs: a key names the phrase-structure
# slot the word fills, and a target word has the key of the source word it
# translates, which is how the gold alignment is known.


def _source_np(np):
    words = [(np.determiner, (id(np), "determiner"))]
    words += [(a, (id(np), "adjective", a)) for a in np.adjectives]
    words.append((np.noun, (id(np), "noun")))
    if np.attachment is not None:
        preposition, inner = np.attachment
        words += [(preposition, (id(np), "preposition")), *_source_np(inner)]
    return words


def _source_clause(clause):
    words = _source_np(clause.subject) + [(clause.verb, (id(clause), "verb"))]
    if clause.obj is not None:
        words += _source_np(clause.obj)
    for i, (preposition, np) in enumerate(clause.phrases):
        words += [(preposition, (id(clause), "phrase", i)), *_source_np(np)]
    if clause.subordinate is not None:
        conjunction, sub = clause.subordinate
        words += [(conjunction, (id(clause), "conjunction")), *_source_clause(sub)]
    return words


def _target_np(np, lexicon):
    gender = lexicon.genders[np.noun]
    words = [
        (lexicon.determiners[np.determiner][gender], (id(np), "determiner")),
        (lexicon.nouns[np.noun], (id(np), "noun")),
    ]
    words += [(lexicon.adjectives[a], (id(np), "adjective", a)) for a in reversed(np.adjectives)]
    if np.attachment is not None:
        preposition, inner = np.attachment
        words += [(lexicon.function_words[preposition], (id(np), "preposition"))]
        words += _target_np(inner, lexicon)
    return words


def _target_clause(clause, lexicon):
    verb = lexicon.verbs[clause.verb][lexicon.genders[clause.subject.noun]]
    verb = (verb, (id(clause), "verb"))
    middle = []
    if clause.obj is not None:
        middle += _target_np(clause.obj, lexicon)
    for i, (preposition, np) in enumerate(clause.phrases):
        middle += [(lexicon.function_words[preposition], (id(clause), "phrase", i))]
        middle += _target_np(np, lexicon)
    subject = _target_np(clause.subject, lexicon)
    if clause.is_subordinate:
        words = subject + middle + [verb]
    else:
        words = subject + [verb] + middle
    if clause.subordinate is not None:
        conjunction, sub = clause.subordinate
        words += [(lexicon.function_words[conjunction], (id(clause), "conjunction"))]
        words += _target_clause(sub, lexicon)
    return words


def _source_words(main_clauses):
    words = []
    for i, clause in enumerate(main_clauses):
        words += ([("and", ("and", i))] if i else []) + _source_clause(clause)
    return words


def _target_words(main_clauses, lexicon=TARGET_LEXICON):
    words = []
    for i, clause in enumerate(main_clauses):
        conjunction = [(lexicon.function_words["and"], ("and", i))] if i else []
        words += conjunction + _target_clause(clause, lexicon)
    return words


def _sentence(words):
    return " ".join(word for word, _ in words) + "."


def _render_source(main_clauses):
    return _sentence(_source_words(main_clauses))


def _render_target(main_clauses, lexicon=TARGET_LEXICON):
    return _sentence(_target_words(main_clauses, lexicon))


def _gold_alignment(main_clauses):
    """The pair's word alignment as a Pharaoh gold line (see
    `synthetic_corpus`): a sure link from each source word to its
    translation, and a possible link between the two last words, which
    share the final period, when they are not already linked."""
    source = {key: i for i, (_, key) in enumerate(_source_words(main_clauses))}
    target = [key for _, key in _target_words(main_clauses)]
    sure = sorted((source[key], j) for j, key in enumerate(target))
    last = (len(source) - 1, len(target) - 1)
    links = [f"{i}-{j}" for i, j in sure]
    if last not in sure:
        links.append(f"{last[0]}?{last[1]}")
    return " ".join(links)


def _check_lengths(min_length, max_length):
    if not isinstance(min_length, int) or min_length < 3:
        raise ValueError(
            "min_length must be an int >= 3 (the shortest sentence, "
            f"'the dog sleeps.', has 3 words); received {min_length!r}."
        )
    if not isinstance(max_length, int) or max_length < min_length:
        raise ValueError(
            f"max_length must be an int >= min_length={min_length}; "
            f"received {max_length!r}."
        )


def _generate(rng, size, min_length, max_length, exclude=None, with_alignments=False):
    """`size` pairs; with `exclude` (a set), no source in it or repeated;
    `with_alignments`: each with its gold alignment (no draw of its own)."""
    pairs = []
    rejected = 0
    while len(pairs) < size:
        main_clauses = _grow_sentence(rng, rng.randint(min_length, max_length))
        source = _render_source(main_clauses)
        if exclude is not None:
            if source in exclude:
                rejected += 1
                if rejected > 1000 + 10 * size:
                    raise ValueError(
                        f"cannot draw {size} new sentences of {min_length} to "
                        f"{max_length} words: nearly all are already used; "
                        "widen the length range or ask for fewer."
                    )
                continue
            exclude.add(source)
        pair = (source, _render_target(main_clauses))
        if with_alignments:
            pair += (_gold_alignment(main_clauses),)
        pairs.append(pair)
    return pairs


def synthetic_corpus(size, seed=0, min_length=5, max_length=60, with_alignments=False):
    """Generate `size` sentence pairs of the synthetic corpus.

    Args:
        size: int >= 0, the number of pairs.
        seed: int (or str), the corpus seed; the same seed always gives the
            same pairs, on every platform and Python version >= 3.10.
        min_length, max_length: the range of source lengths in words (the
            final period is attached to the last word and not counted);
            lengths are drawn uniformly from it. `min_length >= 3`.
        with_alignments: bool, also give each pair's gold word alignment.
            The pairs are the same either way.

    Returns:
        A list of `(source, target)` pairs of str: lowercase words separated
        by single spaces, ending with ".". See the module docstring for the
        grammar. With `with_alignments`, `(source, target, alignment)`
        triples: `alignment` is a gold line in Pharaoh format over the
        space-separated words of both sides (the final period belongs to
        the last word), as `zoo.evaluation.alignment.parse_gold` reads it.
        Each target word has one sure link `i-j`, to the source word it
        translates (an inflected verb to its verb, a determiner to its
        determiner); the two last words, which share the period, have a
        possible link `i?j` unless they are translations of each other.

    Example:

    >>> pairs = synthetic_corpus(1000, seed=0)
    >>> source, target = pairs[0]
    >>> [(source, target, alignment)] = synthetic_corpus(
    ...     1, seed=2, min_length=4, max_length=6, with_alignments=True)
    >>> source, target
    ('a ship watches a sad road.', 'une tigik rosebe una sufud lisul.')
    >>> alignment  # "sad" (4) is "lisul" (5); "road." (5) is "sufud" (4)
    '0-0 1-1 2-2 3-3 4-5 5-4 5?5'
    """
    if not isinstance(size, int) or size < 0:
        raise ValueError(f"size must be an int >= 0; received {size!r}.")
    _check_lengths(min_length, max_length)
    rng = random.Random(f"zoo.data.synthetic:{seed}")
    return _generate(rng, size, min_length, max_length, with_alignments=with_alignments)


def synthetic_splits(
    train_size,
    valid_size,
    test_size,
    seed=0,
    min_length=5,
    max_length=60,
    with_alignments=False,
):
    """Train, validation and test splits of the synthetic corpus.

    Each split is drawn from its own random stream (derived from `seed` and
    the split's name), and a validation or test pair whose source sentence is
    in an earlier split (train, then validation) is drawn again, so no
    source sentence of the test set is seen in training.

    Args:
        train_size, valid_size, test_size: ints >= 0, the number of pairs.
        seed: int (or str), the corpus seed.
        min_length, max_length, with_alignments: as in `synthetic_corpus`.

    Returns:
        `{"train": [...], "valid": [...], "test": [...]}`, lists of
        `(source, target)` pairs (triples with `with_alignments`).
    """
    sizes = {"train": train_size, "valid": valid_size, "test": test_size}
    for name, size in sizes.items():
        if not isinstance(size, int) or size < 0:
            raise ValueError(f"{name}_size must be an int >= 0; received {size!r}.")
    _check_lengths(min_length, max_length)
    splits = {}
    seen = set()
    for name, size in sizes.items():
        rng = random.Random(f"zoo.data.synthetic:{seed}:{name}")
        if name == "train":
            # Train keeps its repeats, as a natural corpus does.
            splits[name] = _generate(rng, size, min_length, max_length, None, with_alignments)
            seen |= {pair[0] for pair in splits[name]}
        else:
            splits[name] = _generate(rng, size, min_length, max_length, seen, with_alignments)
    return splits
