"""Separates the hypotheses for Luong's attention sink on the synthetic corpus.

The reproducer of docs/experiments/2026-12-06-luong-attention-sink.md, kept
as it ran: at a361bf4 (before the Luong recipe had the options that fixed
it), from the repository root with that commit installed:

    TF_NUM_INTRAOP_THREADS=1 KERAS_BACKEND=tensorflow \
        python docs/experiments/2026-12-06-luong-attention-sink.py --name base

Trains one model on word-level ids of the synthetic corpus (4,000 pairs of
5 to 30 words, 300 held out) with one setting changed, and prints validation
loss by epoch, greedy BLEU and where the attention peaks (the share of steps
peaking on source word 0 and on the last word, the median per-sentence
correlation of peak with step, the AER against the gold links). `--patch`
swaps one part of a recipe for another by monkeypatching; its names are the
rows of the table in the log.
"""
import argparse, json, os, time
import numpy as np

p = argparse.ArgumentParser()
p.add_argument("--name", required=True)
p.add_argument("--recipe", default="luong")
p.add_argument("--preset", default="luong_global_general_small")
p.add_argument("--layers", type=int, default=None)
p.add_argument("--lr", type=float, default=1e-2)
p.add_argument("--opt", default="adam")
p.add_argument("--init", default="keras")
p.add_argument("--reverse", type=int, default=0)
p.add_argument("--train", type=int, default=4000)
p.add_argument("--maxlen", type=int, default=30)
p.add_argument("--epochs", type=int, default=4)
p.add_argument("--batch", type=int, default=64)
p.add_argument("--clip", default="clipnorm=1")
p.add_argument("--model", default="{}")
p.add_argument("--seed", type=int, default=0)
p.add_argument("--patch", default="")
p.add_argument("--warmup", type=int, default=0)
a = p.parse_args()

import keras
import zoo
from zoo.data.synthetic import synthetic_corpus
from zoo.evaluation.alignment import alignment_error_rate, parse_gold, peak_links
from zoo.evaluation.bleu import corpus_bleu
from zoo.recipes.decoding import decode_to_lists, greedy_search

pairs = synthetic_corpus(a.train + 300, seed=0, max_length=a.maxlen, with_alignments=True)
train, valid = pairs[: a.train], pairs[a.train :]
src_words = sorted({w for s, _, _ in pairs for w in s.split()})
tgt_words = sorted({w for _, t, _ in pairs for w in t.split()})
sv = {w: i + 4 for i, w in enumerate(src_words)}
tv = {w: i + 4 for i, w in enumerate(tgt_words)}
itv = {i: w for w, i in tv.items()}

def arrays(rows):
    S = max(len(s.split()) for s, _, _ in rows)
    T = max(len(t.split()) for _, t, _ in rows) + 1
    src = np.zeros((len(rows), S), "int32"); tin = np.zeros((len(rows), T), "int32"); tout = np.zeros((len(rows), T), "int32")
    for i, (s, t, _) in enumerate(rows):
        ids = [sv[w] for w in s.split()]
        if a.reverse:
            ids = ids[::-1]
        tids = [tv[w] for w in t.split()]
        src[i, : len(ids)] = ids
        tin[i, 0] = 2; tin[i, 1 : len(tids) + 1] = tids
        tout[i, : len(tids)] = tids; tout[i, len(tids)] = 3
    return src, tin, tout

keras.utils.set_random_seed(a.seed)
if "bilstm" in a.patch:
    import zoo.recipes.luong as L
    class BiLuong(L.Luong):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            H = self.hidden_dim
            self.encoder_layers = [keras.layers.Bidirectional(keras.layers.LSTM(H // 2, return_sequences=True, return_state=True), name=f"benc_{i}") for i in range(self.num_layers)]
        def encode(self, source, training=None):
            from zoo.recipes.seq2seq import source_mask
            mask = source_mask(source, self.pad_id)
            outputs = self.source_embedding(source)
            state = {"source_mask": mask}
            for i, layer in enumerate(self.encoder_layers):
                outputs = self.dropout_layer(outputs, training=training)
                outputs, hf, cf, hb, cb = layer(outputs, mask=mask, training=training)
                state[f"h_{i}"] = keras.ops.concatenate([hf, hb], -1); state[f"c_{i}"] = keras.ops.concatenate([cf, cb], -1)
            if not self.decoder.built:
                self.decoder.build((None, None, self.embedding_dim), tuple(outputs.shape))
            state["memory"] = outputs
            state["projected_keys"] = self.decoder.project_memory(outputs)
            state["feed"] = keras.ops.zeros_like(state["h_0"])
            return state
    L.Luong = BiLuong
if "gru" in a.patch:
    import zoo.recipes.luong as L
    from zoo.layers import LuongDecoder
    class GRULuong(L.Luong):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            H = self.hidden_dim
            if "bigru" in a.patch:
                self.encoder_layers = [keras.layers.Bidirectional(keras.layers.GRU(H, return_sequences=True, return_state=True), name=f"genc_{i}") for i in range(self.num_layers)]
            else:
                self.encoder_layers = [keras.layers.GRU(H, return_sequences=True, return_state=True, name=f"genc_{i}") for i in range(self.num_layers)]
            att = self.decoder.attention
            self.decoder = LuongDecoder([keras.layers.GRUCell(H, name=f"gdec_{i}") for i in range(self.num_layers)], att, input_feeding=True, name="gdecoder")
        @property
        def recurrent_state_keys(self):
            return tuple(f"h_{i}" for i in range(self.num_layers)) + ("feed",)
        def encode(self, source, training=None):
            from zoo.recipes.seq2seq import source_mask
            mask = source_mask(source, self.pad_id)
            outputs = self.source_embedding(source)
            state = {"source_mask": mask}
            for i, layer in enumerate(self.encoder_layers):
                outputs = self.dropout_layer(outputs, training=training)
                if "bigru" in a.patch:
                    outputs, fw, bw = layer(outputs, mask=mask, training=training)
                    state[f"h_{i}"] = bw
                else:
                    outputs, state[f"h_{i}"] = layer(outputs, mask=mask, training=training)
            if not self.decoder.built:
                self.decoder.build((None, None, self.embedding_dim), tuple(outputs.shape))
            state["memory"] = outputs
            state["projected_keys"] = self.decoder.project_memory(outputs)
            state["feed"] = keras.ops.zeros_like(state["h_0"])
            return state
    L.Luong = GRULuong
    import zoo.registry
if "additive" in a.patch:
    import zoo.recipes.luong as L
    from zoo.layers import AdditiveAttention
    L.LuongAttention = lambda score=None, probability_fn=None, **kw: AdditiveAttention(128, **kw)
if "rs_general" in a.patch:
    import zoo.recipes.rnnsearch as R
    from zoo.layers import LuongAttention
    R.AdditiveAttention = lambda units, **kw: LuongAttention(score="general", **kw)
if "query_prev" in a.patch:
    from zoo.layers.luong_decoder import LuongDecoder as LD
    from keras import ops
    def _step(self, inputs, states, memory, projected_memory, memory_mask, step, training):
        count = self.cell_state_count
        if self.input_feeding:
            inputs = ops.concatenate([inputs, ops.cast(states[count], inputs.dtype)], axis=-1)
        context, attention = self._attend(states[self._query_index()], memory, projected_memory, memory_mask, step, training)
        top, new_states = self._run_cell(inputs, states[:count], training)
        attentional = self.attentional_dense(ops.concatenate([ops.cast(context, top.dtype), top], axis=-1))
        if self.input_feeding:
            new_states = new_states + [attentional]
        return attentional, new_states, attention
    LD._step = _step
if "feed_ctx" in a.patch:
    from zoo.layers.luong_decoder import LuongDecoder as LD
    from keras import ops
    def _step(self, inputs, states, memory, projected_memory, memory_mask, step, training):
        count = self.cell_state_count
        inputs = ops.concatenate([inputs, ops.cast(states[count], inputs.dtype)], axis=-1)
        top, new_states = self._run_cell(inputs, states[:count], training)
        context, attention = self._attend(top, memory, projected_memory, memory_mask, step, training)
        attentional = self.attentional_dense(ops.concatenate([ops.cast(context, top.dtype), top], axis=-1))
        return attentional, new_states + [ops.cast(context, top.dtype)], attention
    LD._step = _step
if "wc_bias" in a.patch:
    from zoo.layers.luong_decoder import LuongDecoder as LD
    _init = LD.__init__
    def __init__(self, *args, **kw):
        _init(self, *args, **kw)
        self.attentional_dense.use_bias = True
    LD.__init__ = __init__
if "relu_wc" in a.patch:
    from zoo.layers.luong_decoder import LuongDecoder as LD
    _init4 = LD.__init__
    def __init__(self, *args, **kw):
        _init4(self, *args, **kw)
        self.attentional_dense.activation = keras.activations.relu
    LD.__init__ = __init__
if "maxout_wc" in a.patch:
    from zoo.layers.luong_decoder import LuongDecoder as LD
    from keras import ops
    _init5 = LD.__init__
    def __init__(self, *args, **kw):
        _init5(self, *args, **kw)
        self.attentional_dense = keras.layers.Dense(2 * self.attentional_size, name="attentional_maxout")
    LD.__init__ = __init__
    def _attentional_state(self, top, memory, projected_memory, memory_mask, step, training):
        context, attention = self._attend(top, memory, projected_memory, memory_mask, step, training)
        pre = self.attentional_dense(ops.concatenate([ops.cast(context, top.dtype), top], axis=-1))
        n = self.attentional_size
        return ops.maximum(pre[..., :n], pre[..., n:]), attention
    LD._attentional_state = _attentional_state
if "linear_wc" in a.patch:
    from zoo.layers.luong_decoder import LuongDecoder as LD
    _init2 = LD.__init__
    def __init__(self, *args, **kw):
        _init2(self, *args, **kw)
        self.attentional_dense.activation = keras.activations.linear
    LD.__init__ = __init__
if "out_ctx" in a.patch:
    from zoo.layers.luong_decoder import LuongDecoder as LD
    from keras import ops
    def _step(self, inputs, states, memory, projected_memory, memory_mask, step, training):
        count = self.cell_state_count
        inputs = ops.concatenate([inputs, ops.cast(states[count], inputs.dtype)], axis=-1)
        top, new_states = self._run_cell(inputs, states[:count], training)
        context, attention = self._attend(top, memory, projected_memory, memory_mask, step, training)
        attentional = self.attentional_dense(ops.concatenate([ops.cast(context, top.dtype), top], axis=-1))
        return ops.concatenate([attentional, context], -1), new_states + [attentional], attention
    LD._step = _step
    LD._output_size = lambda self, m: self.attentional_size + m
if "bahdanau_rec" in a.patch:
    from zoo.layers.luong_decoder import LuongDecoder as LD
    from keras import ops
    def _step(self, inputs, states, memory, projected_memory, memory_mask, step, training):
        count = self.cell_state_count
        context, attention = self._attend(states[self._query_index()], memory, projected_memory, memory_mask, step, training)
        inputs = ops.concatenate([inputs, ops.cast(context, inputs.dtype)], axis=-1)
        top, new_states = self._run_cell(inputs, states[:count], training)
        attentional = self.attentional_dense(ops.concatenate([ops.cast(context, top.dtype), top], axis=-1))
        return attentional, new_states + [attentional], attention
    LD._step = _step
if "rs_luong_out" in a.patch:
    import zoo.recipes.rnnsearch as R
    from keras import ops
    _rinit = R.RNNSearch.__init__
    def rinit(self, *args, **kw):
        _rinit(self, *args, **kw)
        self.luong_out = keras.layers.Dense(self.hidden_dim, activation="tanh", use_bias=("bias" in a.patch), name="luong_out")
    R.RNNSearch.__init__ = rinit
    def run_recurrence(self, embedded, state, training=None):
        outputs, attention = self.decoder_over_target(embedded, state, training=training)
        return outputs, attention
    def recurrent_step(self, embedded, state, step):
        outputs, state, attention = self.decoder_step(embedded, state, step)
        return outputs, state, attention
    def output_logits(self, features, training=None):
        return self.output_projection(self.embedding_dropout(self.luong_out(features), training=training))
    R.RNNSearch.run_recurrence = run_recurrence; R.RNNSearch.recurrent_step = recurrent_step; R.RNNSearch.output_logits = output_logits
if "rs_sc_maxout" in a.patch:
    import zoo.recipes.rnnsearch as R
    def run_recurrence(self, embedded, state, training=None):
        return self.decoder_over_target(embedded, state, training=training)
    R.RNNSearch.run_recurrence = run_recurrence
    def recurrent_step(self, embedded, state, step):
        return self.decoder_step(embedded, state, step)
    R.RNNSearch.recurrent_step = recurrent_step
if "rs_tanh_readout" in a.patch:
    import zoo.recipes.rnnsearch as R
    from keras import ops
    _rinit3 = R.RNNSearch.__init__
    def rinit3(self, *args, **kw):
        _rinit3(self, *args, **kw)
        self.tanh_out = keras.layers.Dense(self.maxout_units, activation="tanh", use_bias=True, name="tanh_out")
    R.RNNSearch.__init__ = rinit3
    def output_logits(self, features, training=None):
        return self.output_projection(self.embedding_dropout(self.tanh_out(features), training=training))
    R.RNNSearch.output_logits = output_logits
if "zero_init" in a.patch:
    from zoo.recipes.luong import Luong
    _enc = Luong.encode
    def encode(self, source, training=None):
        state = _enc(self, source, training=training)
        for i in range(self.num_layers):
            state[f"h_{i}"] = keras.ops.zeros_like(state[f"h_{i}"]); state[f"c_{i}"] = keras.ops.zeros_like(state[f"c_{i}"])
        return state
    Luong.encode = encode
overrides = json.loads(a.model)
if a.layers:
    overrides["num_layers"] = a.layers
model = zoo.build(a.preset, source_vocabulary_size=len(sv) + 4, target_vocabulary_size=len(tv) + 4, **overrides)
model.build()
if a.init.startswith("uniform"):
    scale = float(a.init.split(":")[1]) if ":" in a.init else 0.1
    for w in model.weights:
        w.assign(np.random.default_rng(len(w.path)).uniform(-scale, scale, w.shape).astype("float32"))
if a.init.startswith("emb"):
    scale = float(a.init.split(":")[1])
    for w in model.weights:
        if "embedding" in w.path:
            w.assign(np.random.default_rng(len(w.path)).normal(0, scale, w.shape).astype("float32"))
clip = dict(kv.split("=") for kv in a.clip.split(",")) if a.clip else {}
clip = {k: float(v) for k, v in clip.items()}
steps = (a.train // a.batch) * a.epochs
if a.opt == "adam":
    sched = keras.optimizers.schedules.CosineDecay(a.lr, steps, alpha=0.1) if not a.warmup else keras.optimizers.schedules.CosineDecay(0.0, steps - a.warmup, alpha=0.1, warmup_target=a.lr, warmup_steps=a.warmup)
    opt = keras.optimizers.Adam(sched, **clip)
else:
    opt = keras.optimizers.SGD(a.lr, **clip)
model.compile(optimizer=opt, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0),
              jit_compile=(keras.backend.backend() == "jax"))
st, tt = sorted(train, key=lambda r: len(r[0].split())), None
src, tin, tout = arrays(train)
vsrc, vtin, vtout = arrays(valid)
t0 = time.time()
h = model.fit({"source": src, "target_in": tin}, tout, batch_size=a.batch, epochs=a.epochs, verbose=0,
              validation_data=({"source": vsrc, "target_in": vtin}, vtout), shuffle=True)
secs = time.time() - t0
res = greedy_search(model, vsrc)
toks = decode_to_lists(res)
att = keras.ops.convert_to_numpy(res.attention)
hyps = [" ".join(itv.get(i, "?") for i in row) for row in toks]
refs = [t for _, t, _ in valid]
bleu = corpus_bleu(hyps, refs)
w0 = last = n = 0; cors = []; links = []; golds = []
for i, (s, t, g) in enumerate(valid):
    S = len(s.split()); T = len(toks[i])
    if T == 0:
        continue
    peaks = att[i, :T, :S].argmax(-1)
    if a.reverse:
        peaks = S - 1 - peaks
    w0 += (peaks == 0).sum(); last += (peaks == S - 1).sum(); n += T
    if T > 2 and peaks.std() > 0:
        cors.append(np.corrcoef(np.arange(T), peaks)[0, 1])
    else:
        cors.append(0.0)
    A = att[i, :T, :S]
    if a.reverse:
        A = A[:, ::-1]
    links.append(peak_links(A, list(range(S)), list(range(T))))
    golds.append(parse_gold(g))
aer = alignment_error_rate(links, golds).aer
out = {"name": a.name, "val_loss": [round(x, 2) for x in h.history["val_loss"]], "bleu": round(float(getattr(bleu, "score", bleu)), 2),
       "peak_w0": round(w0 / max(n, 1), 3), "peak_last": round(last / max(n, 1), 3), "median_corr": round(float(np.median(cors)), 2),
       "aer": round(float(aer), 2) if aer is not None else None, "secs": round(secs), "args": vars(a)}
print(json.dumps(out))
