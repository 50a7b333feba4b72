"""An embedded synthetic parallel corpus, generated in code from a seed.

The generator is four modules: `lexicon` (the words of both languages),
`grammar` (a sentence's phrase structure), `rendering` (both languages and
the gold alignment) and `corpus` (the seeded pairs and splits).

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

from zoo.data.synthetic.corpus import synthetic_corpus
from zoo.data.synthetic.corpus import synthetic_splits
from zoo.data.synthetic.lexicon import ADJECTIVES
from zoo.data.synthetic.lexicon import CONJUNCTIONS
from zoo.data.synthetic.lexicon import DETERMINERS
from zoo.data.synthetic.lexicon import GENDERS
from zoo.data.synthetic.lexicon import INTRANSITIVE_VERBS
from zoo.data.synthetic.lexicon import NOUNS
from zoo.data.synthetic.lexicon import PREPOSITIONS
from zoo.data.synthetic.lexicon import SPEECH_VERBS
from zoo.data.synthetic.lexicon import TARGET_LEXICON
from zoo.data.synthetic.lexicon import TRANSITIVE_VERBS
from zoo.data.synthetic.lexicon import TargetLexicon
