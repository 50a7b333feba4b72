"""The phrase structure of a synthetic sentence, grown at random to a drawn
length (the grammar in the package docstring)."""

from __future__ import annotations

import dataclasses

from zoo.data.synthetic.lexicon import ADJECTIVES
from zoo.data.synthetic.lexicon import DETERMINERS
from zoo.data.synthetic.lexicon import INTRANSITIVE_VERBS
from zoo.data.synthetic.lexicon import NOUNS
from zoo.data.synthetic.lexicon import PREPOSITIONS
from zoo.data.synthetic.lexicon import SPEECH_VERBS
from zoo.data.synthetic.lexicon import TRANSITIVE_VERBS


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


def grow_sentence(rng, length):
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
