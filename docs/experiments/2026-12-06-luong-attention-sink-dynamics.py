"""The attention's first updates, for docs/experiments/2026-12-06-luong-attention-sink.md.

Trains as the sibling script does (same flags), and every 10 updates prints
the loss, the attention's mass on source word 0 and on the gold links, its
mean peak, the share of saturated attentional units, the memory's mean norm,
the range of the scores and W_a's spectral norm, over 64 held-out pairs:

    python docs/experiments/2026-12-06-luong-attention-sink-dynamics.py --name d --epochs 2
"""
import sys, json, numpy as np
sys.argv = [sys.argv[0]] + sys.argv[1:]
exec(open('docs/experiments/2026-12-06-luong-attention-sink.py').read().split("t0 = time.time()")[0].replace('p.parse_args()', 'p.parse_known_args()[0]'))
vb = {"source": vsrc[:64], "target_in": vtin[:64]}
golds = [parse_gold(g) for _, _, g in valid[:64]]
class Log(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if batch % 10: return
        att = keras.ops.convert_to_numpy(self.model.attention_weights(vb))
        m0 = []; gold = []; peak = []
        for i, (s, t, g) in enumerate(valid[:64]):
            S = len(s.split()); T = len(t.split())
            A = att[i, :T, :S]
            if a.reverse: A = A[:, ::-1]
            m0.append(A[:, 0].mean()); peak.append(A.max(-1).mean())
            gold.append(np.mean([A[j, i_] for (i_, j) in golds[i].sure if j < T and i_ < S]))
        st = self.model.encode(vb["source"])
        mem = keras.ops.convert_to_numpy(st["memory"]); msk = keras.ops.convert_to_numpy(st["source_mask"])
        knorm = np.linalg.norm(mem, axis=-1)[msk].mean()
        lw = np.log(np.maximum(att, 1e-30)); rng_ = []
        for i, (s_, t_, g_) in enumerate(valid[:64]):
            S = len(s_.split()); T = len(t_.split()); L_ = lw[i, :T, :S]; rng_.append((L_.max(-1) - L_.min(-1)).mean())
        wa = [w for w in self.model.weights if "attention" in w.path and "kernel" in w.path]
        wan = np.linalg.norm(keras.ops.convert_to_numpy(wa[0]), 2) if wa else 0
        stt = self.model.encode(vb["source"]); feats, _ = self.model.run_recurrence(self.model.embed_targets(vb["target_in"]), stt)
        feats = keras.ops.convert_to_numpy(feats); tmask = vtin[:64] > 0
        sat = (np.abs(feats[tmask]) > 0.99).mean()
        extra = f" sat {sat:.2f} |h~| {np.abs(feats[tmask]).mean():.2f}"
        extra += f" |k| {knorm:.3f} score_range {np.mean(rng_):.1f} |Wa|2 {wan:.2f}"
        print(f"step {self.model.optimizer.iterations.numpy()} loss {logs['loss']:.2f} mass0 {np.mean(m0):.3f} gold {np.mean(gold):.3f} peak {np.mean(peak):.3f}" + extra, flush=True)
model.fit({"source": src, "target_in": tin}, tout, batch_size=a.batch, epochs=a.epochs, verbose=0, callbacks=[Log()])
