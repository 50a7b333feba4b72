"""Tests of zoo.data: synthetic corpus, readers, tokenizer and tf.data pipeline.

The synthetic corpus and the readers are pure Python and run on every
backend; the tokenizer and the pipeline need TensorFlow and are marked.
"""

import collections
import gzip
from pathlib import Path

import numpy as np
import pytest

from zoo.data import TARGET_LEXICON
from zoo.data import CorpusError
from zoo.data import read_corpus
from zoo.data import read_parallel_text
from zoo.data import read_tsv
from zoo.data import synthetic_corpus
from zoo.data import synthetic_splits

MULTI30K = Path(__file__).resolve().parents[3].parent / "shared/data/multi30k"

LEX = TARGET_LEXICON
TARGET_NOUN_GENDER = {LEX.nouns[n]: LEX.genders[n] for n in LEX.nouns}
TARGET_ADJECTIVES = set(LEX.adjectives.values())
TARGET_VERB_GENDER = {
    form: gender for forms in LEX.verbs.values() for gender, form in forms.items()
}
TARGET_DETERMINER_GENDER = {
    form: gender for forms in LEX.determiners.values() for gender, form in forms.items()
}
T_AND, T_BECAUSE, T_THAT = (LEX.function_words[w] for w in ("and", "because", "that"))


def words(sentence):
    """The words of a synthetic sentence, without the final period."""
    assert sentence.endswith(".")
    return sentence[:-1].split()


def target_clauses(sentence):
    """[(is_subordinate, words)] of a target sentence, in order."""
    clauses = [[False, []]]
    for word in words(sentence):
        if word in (T_AND, T_BECAUSE, T_THAT):
            clauses.append([word != T_AND, []])
        else:
            clauses[-1][1].append(word)
    return clauses


@pytest.fixture(scope="module")
def corpus():
    return synthetic_corpus(2000, seed=0)


# --- synthetic corpus ---------------------------------------------------------


def test_synthetic_corpus_is_deterministic_and_seeded():
    assert synthetic_corpus(50, seed=7) == synthetic_corpus(50, seed=7)
    assert synthetic_corpus(50, seed=7) != synthetic_corpus(50, seed=8)
    # The example of the module docstring: a change of the generator or the
    # lexicon changes every corpus, so it must be deliberate.
    assert synthetic_corpus(400, seed=0, min_length=10, max_length=16)[365] == (
        "a sad queen near this bird helps the boat because the student paints "
        "a white fish.",
        "une nutim lisul pres esto guvek tulone da ponis vel do rozar una telos "
        "gelol degeko.",
    )


def test_synthetic_lengths_fill_every_ten_word_bucket(corpus):
    lengths = [len(source.split()) for source, _ in corpus]
    assert min(lengths) == 5 and max(lengths) == 60
    buckets = collections.Counter((length - 1) // 10 for length in lengths)
    # Uniform lengths: about 6/56 of the pairs in 1-10, 10/56 in the others.
    assert [buckets[b] >= 150 for b in range(6)] == [True] * 6, buckets
    for source, target in corpus:
        assert source == source.lower() and source.endswith(".")
        assert len(words(source)) == len(words(target))


def test_synthetic_target_is_a_word_by_word_translation(corpus):
    lemma = {LEX.nouns[w]: w for w in LEX.nouns}
    lemma |= {LEX.adjectives[w]: w for w in LEX.adjectives}
    lemma |= {v: k for k, v in LEX.function_words.items()}
    for table in (LEX.verbs, LEX.determiners):
        lemma |= {form: w for w, forms in table.items() for form in forms.values()}
    for source, target in corpus[:300]:
        assert collections.Counter(lemma[w] for w in words(target)) == (
            collections.Counter(words(source))
        )


def test_synthetic_adjectives_follow_their_noun_in_mirror_order(corpus):
    checked = 0
    for source, target in corpus[:500]:
        src, tgt = words(source), words(target)
        target_bigrams = set(zip(tgt, tgt[1:]))
        for first, second in zip(src, src[1:]):
            if first in LEX.adjectives and second in LEX.nouns:
                noun, adjective = LEX.nouns[second], LEX.adjectives[first]
                assert (noun, adjective) in target_bigrams, (source, target)
                checked += 1
            if first in LEX.adjectives and second in LEX.adjectives:
                pair = (LEX.adjectives[second], LEX.adjectives[first])
                assert pair in target_bigrams, (source, target)
        # A target determiner is always followed by its noun.
        for determiner, nxt in zip(tgt, tgt[1:]):
            if determiner in TARGET_DETERMINER_GENDER:
                assert nxt in TARGET_NOUN_GENDER, (source, target)
    assert checked > 500


def test_synthetic_subordinate_verb_moves_to_the_end(corpus):
    subordinate = moved = 0
    for source, target in corpus[:500]:
        for is_subordinate, clause in target_clauses(target):
            verbs = [i for i, w in enumerate(clause) if w in TARGET_VERB_GENDER]
            assert len(verbs) == 1, (clause, target)
            if is_subordinate:
                subordinate += 1
                assert verbs[0] == len(clause) - 1, (clause, target)
            else:
                # A main clause keeps its verb right after the subject
                # phrase, which ends with a noun or an adjective.
                before = clause[verbs[0] - 1]
                assert before in TARGET_NOUN_GENDER or before in TARGET_ADJECTIVES
        # Source: the verb of a subordinate clause is not final when the
        # clause has an object or a phrase; count those moves.
        src = words(source)
        for i, word in enumerate(src):
            if word in ("because", "that"):
                end = src.index("and", i) if "and" in src[i:] else len(src)
                clause = src[i + 1 : end]
                verb = [j for j, w in enumerate(clause) if w in LEX.verbs]
                assert len(verb) == 1
                moved += verb[0] != len(clause) - 1
    assert subordinate > 200 and moved > 100


def test_synthetic_agreement_reaches_across_other_nouns(corpus):
    across = clauses = 0
    for source, target in corpus[:500]:
        tgt = words(target)
        for determiner, noun in zip(tgt, tgt[1:]):
            if determiner in TARGET_DETERMINER_GENDER:
                assert TARGET_DETERMINER_GENDER[determiner] == TARGET_NOUN_GENDER[noun]
        # The verb agrees with the head noun of its clause's subject: the
        # first noun of the source clause, translated.
        source_clauses = [[]]
        for word in words(source):
            if word in ("and", "because", "that"):
                source_clauses.append([])
            else:
                source_clauses[-1].append(word)
        target_side = target_clauses(target)
        assert len(source_clauses) == len(target_side)
        for src_clause, (_, tgt_clause) in zip(source_clauses, target_side):
            subject = next(w for w in src_clause if w in LEX.nouns)
            verb = next(w for w in tgt_clause if w in TARGET_VERB_GENDER)
            assert TARGET_VERB_GENDER[verb] == LEX.genders[subject], (source, target)
            clauses += 1
            between = tgt_clause[1 : tgt_clause.index(verb)]
            genders = {TARGET_NOUN_GENDER.get(w) for w in between} - {None}
            across += bool(genders - {LEX.genders[subject]})
    # Many verbs sit after a noun of another gender than their subject's.
    assert across > 0.2 * clauses


def test_synthetic_splits_are_disjoint_and_deterministic():
    splits = synthetic_splits(300, 50, 50, seed=1)
    assert [len(splits[k]) for k in ("train", "valid", "test")] == [300, 50, 50]
    assert splits == synthetic_splits(300, 50, 50, seed=1)
    train = {source for source, _ in splits["train"]}
    valid = {source for source, _ in splits["valid"]}
    test = {source for source, _ in splits["test"]}
    assert not (train & valid) and not (train & test) and not (valid & test)
    assert splits["train"] != synthetic_corpus(300, seed=1)
    # `zoo train --valid-size/--test-size` change only those splits.
    smaller = synthetic_splits(300, 20, 0, seed=1)
    assert smaller["train"] == splits["train"] and smaller["test"] == []
    assert smaller["valid"] == splits["valid"][:20]


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(size=-1),
        dict(size=3, min_length=2),
        dict(size=3, min_length=9, max_length=8),
    ],
)
def test_synthetic_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        synthetic_corpus(**kwargs)


# --- readers -----------------------------------------------------------------


def write(path, data, compress=False):
    data = data.encode("utf-8") if isinstance(data, str) else data
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def test_read_parallel_text_plain_and_gzip(tmp_path):
    source = "\ufeffA dog runs.\r\n  \nTwo cats sleep.\nThe end\n"
    target = "Ein Hund läuft.\r\nLeer\nZwei Katzen schlafen.\n   Schluss   "
    expected = [
        ("A dog runs.", "Ein Hund läuft."),
        ("Two cats sleep.", "Zwei Katzen schlafen."),
        ("The end", "Schluss"),
    ]
    plain = read_parallel_text(
        write(tmp_path / "a.en", source), write(tmp_path / "a.de", target)
    )
    assert plain.pairs == expected and plain.skipped_empty == 1 and len(plain) == 3
    assert plain.sources == [s for s, _ in expected]
    zipped = read_parallel_text(
        write(tmp_path / "b.en.gz", source, compress=True),
        write(tmp_path / "b.de.gz", target, compress=True),
    )
    assert zipped.pairs == expected and zipped.skipped_empty == 1
    assert zipped.source_path.endswith("b.en.gz")


def test_read_tsv_takes_the_anki_layout(tmp_path):
    path = write(
        tmp_path / "deu.txt",
        "Go.\tGeh.\tCC-BY 2.0 (France) Attribution: tatoeba.org\n"
        "\n"
        "Hi.\t\tempty target\n"
        "Run!\tLauf!\n",
    )
    corpus = read_tsv(path)
    assert corpus.pairs == [("Go.", "Geh."), ("Run!", "Lauf!")]
    assert corpus.skipped_empty == 2
    swapped = read_tsv(path, source_column=1, target_column=0)
    assert swapped.pairs == [("Geh.", "Go."), ("Lauf!", "Run!")]


def test_read_corpus_dispatches_on_the_spec(tmp_path):
    en = write(tmp_path / "x.en", "a\nb\n")
    de = write(tmp_path / "x.de", "A\nB\n")
    tsv = write(tmp_path / "x.tsv", "a\tA\nb\tB\n")
    expected = [("a", "A"), ("b", "B")]
    assert read_corpus(f"{en},{de}").pairs == expected
    assert read_corpus((en, de)).pairs == expected
    assert read_corpus(str(tsv)).pairs == expected
    with pytest.raises(CorpusError, match="SOURCE,TARGET"):
        read_corpus(f"{en},{de},{tsv}")


def broken_cases(tmp_path):
    """(name, function, fragments the one-line message must hold)."""
    ok = write(tmp_path / "ok.en", "one\ntwo\nthree\n")
    short = write(tmp_path / "short.de", "eins\nzwei\n")
    empty = write(tmp_path / "empty.de", "")
    bad_utf8 = write(tmp_path / "bad.de", b"eins\nzwei \xff drei\ndrei\n")
    no_tab = write(tmp_path / "notab.tsv", "a\tA\nb B\n")
    few_columns = write(tmp_path / "few.tsv", "a\tA\tx\nb\tB\n")
    not_gzip = write(tmp_path / "fake.de.gz", "eins\nzwei\ndrei\n")
    missing = tmp_path / "missing.de"
    return {
        "line counts": (
            lambda: read_parallel_text(ok, short),
            ["ok.en", "3 lines", "short.de", "has 2"],
        ),
        "empty file": (lambda: read_parallel_text(ok, empty), ["empty.de", "empty"]),
        "invalid utf-8": (
            lambda: read_parallel_text(ok, bad_utf8),
            ["bad.de:2:", "UTF-8"],
        ),
        "tsv without tab": (lambda: read_tsv(no_tab), ["notab.tsv:2:", "no tab"]),
        "tsv column": (
            lambda: read_tsv(few_columns, target_column=2),
            ["few.tsv:2:", "2 columns"],
        ),
        "not gzip": (
            lambda: read_parallel_text(ok, not_gzip),
            ["fake.de.gz", "cannot be read"],
        ),
        "missing file": (
            lambda: read_parallel_text(ok, missing),
            ["missing.de", "no such file"],
        ),
        "missing in spec": (lambda: read_corpus(f"{ok},{missing}"), ["missing.de"]),
    }


@pytest.mark.parametrize(
    "case",
    [
        "line counts",
        "empty file",
        "invalid utf-8",
        "tsv without tab",
        "tsv column",
        "not gzip",
        "missing file",
        "missing in spec",
    ],
)
def test_broken_corpus_raises_a_one_line_error(tmp_path, case):
    read, fragments = broken_cases(tmp_path)[case]
    with pytest.raises(CorpusError) as info:
        read()
    message = str(info.value)
    assert isinstance(info.value, ValueError)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message


def test_read_multi30k_validation_set():
    if not (MULTI30K / "val.en.gz").exists():
        pytest.skip(f"Multi30k is not at {MULTI30K} (shared data folder absent)")
    corpus = read_parallel_text(MULTI30K / "val.en.gz", MULTI30K / "val.de.gz")
    assert len(corpus) == 1014 and corpus.skipped_empty == 0
    sleeping = "Ein Mann schläft in einem grünen Raum auf einem Sofa."
    assert corpus.pairs[1][1] == sleeping
    spec = f"{MULTI30K / 'val.en.gz'},{MULTI30K / 'val.de.gz'}"
    assert read_corpus(spec).pairs == corpus.pairs


# --- tokenizer (TensorFlow) -----------------------------------------------

GERMAN = [
    "Ein Mädchen läuft über die Straße.",
    "Zwei Männer tragen große, grüne Hüte.",
    "Ein Junge im T-Shirt isst süßes Obst; die Frau lächelt!",
    "Der Hund des Mannes spielt (draußen) im Schnee?",
    "Öl, Äpfel und Übungen: schön.",
]


@pytest.fixture(scope="module")
def german_tokenizer():
    from zoo.data import TextTokenizer

    # Pieces seen fewer than 10 times are not learned: repeat the sentences.
    return TextTokenizer.train(GERMAN * 10, 500)


@pytest.fixture(scope="module")
def synthetic_tokenizers():
    from zoo.data import TextTokenizer

    pairs = synthetic_corpus(300, seed=1)
    source = TextTokenizer.train([s for s, _ in pairs], 300)
    target = TextTokenizer.train([t for _, t in pairs], 300)
    return pairs, source, target


@pytest.mark.tensorflow_only
def test_reserved_tokens_have_fixed_ids(german_tokenizer):
    from zoo.data import BOS_ID
    from zoo.data import EOS_ID
    from zoo.data import PAD_ID
    from zoo.data import UNK_ID

    assert (PAD_ID, UNK_ID, BOS_ID, EOS_ID) == (0, 1, 2, 3)
    assert german_tokenizer.vocabulary[:4] == ["[PAD]", "[UNK]", "[BOS]", "[EOS]"]
    assert german_tokenizer.token_to_id("[EOS]") == EOS_ID
    assert german_tokenizer.id_to_token(UNK_ID) == "[UNK]"
    assert german_tokenizer.vocabulary_size == len(german_tokenizer.vocabulary) <= 500


@pytest.mark.tensorflow_only
def test_round_trip_keeps_umlauts_and_punctuation(german_tokenizer):
    tokenizer = german_tokenizer
    assert tokenizer.lowercase
    ids = tokenizer.encode(GERMAN)
    assert all(1 not in row for row in ids)  # every word is in the vocabulary
    decoded = [tokenizer.decode(row) for row in ids]
    assert decoded == tokenizer.normalize(GERMAN)
    # The normal form of ordinary text is the lowercased text: "ß" stays
    # (no case folding to "ss"), accents stay, punctuation is re-attached.
    assert decoded == [sentence.lower() for sentence in GERMAN]
    assert tokenizer.normalize("STRAẞE Ä") == "straße ä"


@pytest.mark.tensorflow_only
def test_decode_stops_at_eos_and_drops_pad_and_bos(german_tokenizer):
    ids = german_tokenizer.encode(["Ein Mädchen läuft."])[0]
    assert len(ids) > 3
    padded = [2, *ids, 3, *ids, 0, 0]
    assert german_tokenizer.decode(np.array(padded)) == "ein mädchen läuft."
    prefix = german_tokenizer.decode(ids[:2])
    assert german_tokenizer.decode([2, 0, *ids[:2], 0]) == prefix


@pytest.mark.tensorflow_only
def test_unknown_word_becomes_unk(german_tokenizer):
    ids = german_tokenizer.encode(["ein ωμέγα mädchen"])[0]
    assert 1 in ids
    assert german_tokenizer.decode(ids) == "ein [UNK] mädchen"


@pytest.mark.tensorflow_only
def test_tokenize_runs_inside_tf_data(german_tokenizer):
    import tensorflow as tf

    dataset = tf.data.Dataset.from_tensor_slices(GERMAN).map(german_tokenizer.tokenize)
    from_data = [row.numpy().tolist() for row in dataset]
    assert from_data == german_tokenizer.encode(GERMAN)
    batch = german_tokenizer.tokenize(tf.constant(GERMAN[:2]))
    assert isinstance(batch, tf.RaggedTensor) and batch.dtype == tf.int32
    assert batch.to_list() == from_data[:2]


@pytest.mark.tensorflow_only
def test_several_tokenizers_do_not_read_as_one_function_retraced():
    # A run's tokenizers are learned, then loaded again (zoo.load): each
    # traces its own functions once, which is no retracing.
    import logging

    import tensorflow as tf

    from zoo.data import TextTokenizer

    warnings = []
    handler = logging.Handler()
    handler.emit = lambda record: warnings.append(record.getMessage())
    tf.get_logger().addHandler(handler)
    try:
        for _ in range(6):
            tokenizer = TextTokenizer(["[PAD]", "[UNK]", "[BOS]", "[EOS]", "a", "b"])
            assert tokenizer.encode(["a b", "b"]) == [[4, 5], [5]]
            assert tokenizer.detokenize([[4, 5]]).numpy().tolist() == [b"a b"]
    finally:
        tf.get_logger().removeHandler(handler)
    assert not [message for message in warnings if "retracing" in message]


@pytest.mark.tensorflow_only
def test_save_and_load_restore_the_tokenizer(german_tokenizer, tmp_path):
    from zoo.data import TextTokenizer

    path = tmp_path / "vocabulary.txt"
    german_tokenizer.save(path)
    lines = path.read_text(encoding="utf-8").split("\n")
    assert lines[:-1] == german_tokenizer.vocabulary and lines[-1] == ""
    loaded = TextTokenizer.load(path)
    assert loaded.vocabulary == german_tokenizer.vocabulary and loaded.lowercase
    assert loaded.encode(GERMAN) == german_tokenizer.encode(GERMAN)
    # Casing is a property of the vocabulary, so it survives the file too.
    reserved = ["[PAD]", "[UNK]", "[BOS]", "[EOS]"]
    cased = TextTokenizer(reserved + ["Ein", "ein", "Hund", "."])
    cased.save(tmp_path / "cased.txt")
    reloaded = TextTokenizer.load(tmp_path / "cased.txt")
    assert not reloaded.lowercase
    assert reloaded.encode(["Ein Hund. ein"]) == [[4, 6, 7, 5]]


@pytest.mark.tensorflow_only
def test_vocabulary_without_reserved_tokens_is_rejected(tmp_path):
    from zoo.data import TextTokenizer

    with pytest.raises(ValueError, match=r"\[PAD\]"):
        TextTokenizer(["[UNK]", "[PAD]", "[BOS]", "[EOS]", "a"])
    path = write(tmp_path / "vocab.txt", "[PAD]\n[UNK]\n[BOS]\n[EOS]\na\na\n")
    with pytest.raises(ValueError, match="vocab.txt.*repeats"):
        TextTokenizer.load(path)


# --- pipeline (TensorFlow) ------------------------------------------------


def batches(dataset):
    return [
        (x["source"].numpy(), x["target_in"].numpy(), y.numpy()) for x, y in dataset
    ]


@pytest.mark.tensorflow_only
def test_batches_have_bos_eos_and_zero_padding(synthetic_tokenizers):
    from zoo.data import make_translation_dataset

    pairs, source_tokenizer, target_tokenizer = synthetic_tokenizers
    dataset = make_translation_dataset(
        pairs, source_tokenizer, target_tokenizer, batch_size=16, shuffle=False
    )
    spec_x, spec_y = dataset.element_spec
    assert set(spec_x) == {"source", "target_in"}
    specs = (spec_x["source"], spec_x["target_in"], spec_y)
    assert all(spec.dtype.name == "int32" for spec in specs)
    translation = {source: target for source, target in pairs}
    seen = 0
    for source, target_in, target_out in batches(dataset):
        assert source.ndim == 2 and target_in.shape == target_out.shape
        assert len(source) == len(target_in) <= 16
        assert (target_in[:, 0] == 2).all()
        for src_row, in_row, out_row in zip(source, target_in, target_out):
            n = np.count_nonzero(out_row)
            assert (out_row[n:] == 0).all() and (in_row[n:] == 0).all()
            assert out_row[n - 1] == 3 and 3 not in in_row
            np.testing.assert_array_equal(in_row[1:n], out_row[: n - 1])
            m = np.count_nonzero(src_row)
            assert (src_row[m:] == 0).all() and 2 not in src_row and 3 not in src_row
            # The row translates back to its pair.
            source_text = source_tokenizer.decode(src_row)
            assert target_tokenizer.decode(in_row) == translation[source_text]
            seen += 1
    assert seen == len(pairs)


@pytest.mark.tensorflow_only
def test_batches_group_sentences_of_similar_length(synthetic_tokenizers):
    from zoo.data import make_translation_dataset

    pairs, source_tokenizer, target_tokenizer = synthetic_tokenizers

    def spreads(**kwargs):
        dataset = make_translation_dataset(
            pairs, source_tokenizer, target_tokenizer, batch_size=16, seed=0, **kwargs
        )
        result = []
        for source, _, target_out in batches(dataset):
            lengths = np.maximum(
                np.count_nonzero(source, axis=1), np.count_nonzero(target_out, axis=1)
            )
            result.append(lengths.max() - lengths.min())
        return result

    # Default buckets are 8 tokens wide; without buckets a shuffled batch of
    # 5- to 60-word sentences spans far more.
    assert max(spreads()) < 8
    assert max(spreads(bucket_boundaries=list(range(20, 200, 20)))) < 20
    assert max(spreads(bucket_boundaries=[])) >= 20


@pytest.mark.tensorflow_only
def test_padding_to_bucket_boundaries_gives_a_few_fixed_shapes(synthetic_tokenizers):
    from zoo.data import make_translation_dataset

    pairs, source_tokenizer, target_tokenizer = synthetic_tokenizers

    def epoch(**kwargs):
        return batches(
            make_translation_dataset(
                pairs, source_tokenizer, target_tokenizer, batch_size=16, shuffle=False, **kwargs
            )
        )

    padded, unpadded = epoch(pad_to_bucket_boundary=True), epoch()
    assert len(padded) == len(unpadded)
    widths = set()
    for (source, target_in, target_out), (u_source, u_target_in, u_target_out) in zip(
        padded, unpadded
    ):
        # All three padded to the bucket's upper boundary minus 1 (of 8, 16, ...).
        width = source.shape[1]
        assert target_in.shape[1] == target_out.shape[1] == width
        assert width % 8 == 7 and width >= max(u_source.shape[1], u_target_in.shape[1])
        widths.add(width)
        # The same rows, with more padding.
        np.testing.assert_array_equal(source[:, : u_source.shape[1]], u_source)
        np.testing.assert_array_equal(target_out[:, : u_target_out.shape[1]], u_target_out)
        assert not source[:, u_source.shape[1] :].any()
        assert not target_in[:, u_target_in.shape[1] :].any()
    assert len(widths) == len({(b // 8) for b in widths})  # one width per bucket


@pytest.mark.tensorflow_only
def test_shuffle_is_deterministic_with_a_seed(synthetic_tokenizers):
    from zoo.data import make_translation_dataset

    pairs, source_tokenizer, target_tokenizer = synthetic_tokenizers

    def epochs(seed, count=2):
        dataset = make_translation_dataset(
            pairs[:120], source_tokenizer, target_tokenizer, batch_size=8, seed=seed
        )
        return [[b[0].tolist() for b in batches(dataset)] for _ in range(count)]

    first = epochs(seed=5)
    assert first == epochs(seed=5)
    assert first[0] != first[1]  # reshuffled each epoch
    assert first != epochs(seed=6)


@pytest.mark.tensorflow_only
def test_long_pairs_are_dropped_and_counted(synthetic_tokenizers):
    from zoo.data import encode_pairs
    from zoo.data import make_translation_dataset

    pairs, source_tokenizer, target_tokenizer = synthetic_tokenizers
    sources, targets = zip(*pairs)
    source_lengths = [len(ids) for ids in source_tokenizer.encode(sources)]
    target_lengths = [len(ids) for ids in target_tokenizer.encode(targets)]
    fits = [s <= 30 and t + 1 <= 35 for s, t in zip(source_lengths, target_lengths)]
    encoded = encode_pairs(
        pairs,
        source_tokenizer,
        target_tokenizer,
        max_source_length=30,
        max_target_length=35,
    )
    assert encoded.dropped == fits.count(False) > 0 and len(encoded) == fits.count(True)
    dataset = make_translation_dataset(encoded, None, None, batch_size=32)
    kept = batches(dataset)
    assert sum(len(b[0]) for b in kept) == fits.count(True)
    assert max(source.shape[1] for source, _, _ in kept) <= 30
    assert max(target_in.shape[1] for _, target_in, _ in kept) <= 35
