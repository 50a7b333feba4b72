"""The ONNX runner's beam 5 against its greedy at batch 32, with the partial
top-k (`zoo.export.onnx_runner.beam._top_k`) and the stable full sort it
replaced, side by side in one process, on an ONNX export of a trained run.

The reproducer of docs/experiments/2026-12-07-onnx-runner-top-k.md:

    zoo export RUN --format onnx --quantize int8 --out EXPORT
    python docs/experiments/2026-12-07-onnx-runner-top-k.py EXPORT \
        $D/test_2016_flickr.en.gz 320
"""
import gzip, sys, time
import numpy as np
from zoo.export import onnx_runner
from zoo.export.onnx_runner import beam

def full_sort_top_k(values, k):
    indices = np.argsort(-values, axis=-1, kind="stable")[..., :k]
    return np.take_along_axis(values, indices, axis=-1), indices.astype("int32")

folder, data = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 320
with gzip.open(data, "rt") as f:
    sentences = [line.strip() for line in f][:n]
t = onnx_runner.load(folder)

def run(beam_width):
    out = []
    start = time.perf_counter()
    for i in range(0, len(sentences), 32):
        out += [r.text for r in t.translate(sentences[i:i + 32], beam=beam_width)]
    return time.perf_counter() - start, out

partial = beam._top_k
run(1); run(5)  # warm-up
results = {}
for name, top_k in (("full sort", full_sort_top_k), ("partial", partial), ("full sort again", full_sort_top_k), ("partial again", partial)):
    beam._top_k = top_k
    g, _ = run(1)
    b, texts = run(5)
    results[name] = texts
    print(f"{name:16s} greedy {len(sentences)/g:7.1f} sent/s  beam5 {len(sentences)/b:7.1f} sent/s  beam5/greedy time {b/g:5.2f}x", flush=True)
print("same beam-5 translations:", results["full sort"] == results["partial"])
