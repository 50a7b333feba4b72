"""A grown sentence written out in both languages, and its gold word
alignment."""

from __future__ import annotations

from zoo.data.synthetic.lexicon import TARGET_LEXICON


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


def render_source(main_clauses):
    return _sentence(_source_words(main_clauses))


def render_target(main_clauses, lexicon=TARGET_LEXICON):
    return _sentence(_target_words(main_clauses, lexicon))


def gold_alignment(main_clauses):
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
