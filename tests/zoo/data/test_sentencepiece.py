"""zoo.data.SentencePieceTokenizer: trained in memory with the contract's
special ids, deterministic, keeps case and accents, the same in tf.data and
in Python, and saved and reloaded from its `.model` file."""

import numpy as np
import pytest

pytestmark = pytest.mark.tensorflow_only  # tensorflow-text's SentencePiece op

SENTENCES = [
    "Ein Mädchen läuft über die Straße.",
    "Zwei Männer tragen große, grüne Hüte.",
    "Der Hund des Mannes spielt (draußen) im Schnee?",
    "Öl, Äpfel und Übungen: schön.",
    "A man in a T-shirt sees a dog.",
]


@pytest.fixture(scope="module")
def tokenizer():
    from zoo.data import SentencePieceTokenizer

    return SentencePieceTokenizer.train(SENTENCES * 4, 90)


def test_training_gives_the_contract_special_ids_and_is_deterministic(tokenizer):
    from zoo.data import SentencePieceTokenizer

    assert tokenizer.vocabulary[:4] == ["[PAD]", "[UNK]", "[BOS]", "[EOS]"]
    assert tokenizer.token_to_id("[EOS]") == 3 and tokenizer.id_to_token(1) == "[UNK]"
    assert 4 < tokenizer.vocabulary_size == len(tokenizer.vocabulary) <= 90
    assert not tokenizer.lowercase
    again = SentencePieceTokenizer.train(SENTENCES * 4, 90)
    assert again.proto == tokenizer.proto
    bpe = SentencePieceTokenizer.train(SENTENCES * 4, 90, model_type="bpe")
    assert bpe.proto != tokenizer.proto and bpe.vocabulary[:4] == tokenizer.vocabulary[:4]
    with pytest.raises(ValueError, match="model_type.*'wordpiece'"):
        SentencePieceTokenizer.train(SENTENCES, 90, model_type="wordpiece")
    with pytest.raises(ValueError, match="vocabulary_size.*received 4"):
        SentencePieceTokenizer.train(SENTENCES, 4)
    with pytest.raises(ValueError, match="of 10 pieces: Vocabulary size is smaller"):
        SentencePieceTokenizer.train(SENTENCES, 10)  # fewer than the characters


def test_round_trip_keeps_case_accents_and_punctuation(tokenizer):
    ids = tokenizer.encode(SENTENCES)
    assert all(1 not in row for row in ids)
    assert [tokenizer.decode(row) for row in ids] == SENTENCES
    assert tokenizer.normalize(SENTENCES) == SENTENCES
    assert tokenizer.normalize("  Ein\u00a0 Mädchen ") == "Ein Mädchen"
    first = ids[0]
    assert tokenizer.decode([2, *first, 3, *first, 0]) == SENTENCES[0]
    unknown = tokenizer.encode(["Ein ωμέγα Hund"])[0]
    assert 1 in unknown and tokenizer.decode(unknown) == "Ein [UNK] Hund"


def test_tokenize_in_tf_data_is_encode_and_sentencepiece_itself(tokenizer):
    import sentencepiece
    import tensorflow as tf

    dataset = tf.data.Dataset.from_tensor_slices(SENTENCES).map(tokenizer.tokenize)
    from_data = [row.numpy().tolist() for row in dataset]
    processor = sentencepiece.SentencePieceProcessor(model_proto=tokenizer.proto)
    assert from_data == tokenizer.encode(SENTENCES) == processor.encode(SENTENCES)
    batch = tokenizer.tokenize(tf.constant(SENTENCES[:2]))
    assert isinstance(batch, tf.RaggedTensor) and batch.dtype == tf.int32
    assert batch.to_list() == from_data[:2]


def test_detokenize_is_decode(tokenizer):
    rows = np.random.default_rng(0).integers(0, tokenizer.vocabulary_size, (300, 9))
    for batch in (rows.astype("int32"), np.zeros((2, 0), "int32")):
        got = [text.decode("utf-8") for text in tokenizer.detokenize(batch).numpy()]
        assert got == [tokenizer.decode(row) for row in batch]


def test_save_and_load_by_file_suffix(tokenizer, tmp_path):
    from zoo.data import SentencePieceTokenizer
    from zoo.data import load_tokenizer

    tokenizer.save(tmp_path / "target.model")
    loaded = load_tokenizer(tmp_path / "target.model")
    assert isinstance(loaded, SentencePieceTokenizer)
    assert loaded.encode(SENTENCES) == tokenizer.encode(SENTENCES)
    (tmp_path / "broken.model").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="broken.model: not a SentencePiece model"):
        load_tokenizer(tmp_path / "broken.model")
    with pytest.raises(ValueError, match="notes.txt: not a vocabulary file"):
        load_tokenizer(tmp_path / "notes.txt")
