"""The Python half of bench/python_ct2.sh: one translate_batch call, timed.

    python3 bench/python_ct2.py ENGINE MODEL TYPE BEAM BATCH MAX_LEN THREADS INPUT OUTPUT
        ENGINE: clf (clformer.Translator on the model directory MODEL) or ct2
        (ctranslate2.Translator on the CTranslate2 directory MODEL); TYPE: the weight
        type (clformer: f32, f16, bf16, int8; CTranslate2: float32, int8). Opens the
        translator, then times one translate_batch on INPUT's lines split into tokens
        (both engines take the tokens as they are: no tokenizer runs), length penalty 0,
        up to MAX_LEN output tokens. Writes the best hypotheses to OUTPUT (tokens joined
        by spaces) and prints `TOKENS SECONDS TOKENS/S` (output tokens without the end
        token; loading excluded).
"""

import sys
import time


def main():
    engine, model, wtype = sys.argv[1:4]
    beam, batch, max_len, threads = map(int, sys.argv[4:8])
    path_in, path_out = sys.argv[8:10]
    with open(path_in, encoding="utf-8") as f:
        lines = [line.split() for line in f]
    if engine == "clf":
        import clformer

        t = clformer.Translator(model, device="cpu", weight_type=wtype, threads=threads)

        def run():
            return t.translate_batch(lines, beam_size=beam, max_batch_size=batch,
                                     length_penalty=0.0, max_decoding_length=max_len)
    elif engine == "ct2":
        import ctranslate2

        t = ctranslate2.Translator(model, device="cpu", compute_type=wtype, inter_threads=1,
                                   intra_threads=threads)

        def run():
            return t.translate_batch(lines, max_batch_size=batch, beam_size=beam,
                                     length_penalty=0.0, max_decoding_length=max_len)
    else:
        sys.exit(__doc__)
    start = time.perf_counter()
    res = run()
    seconds = time.perf_counter() - start
    tokens = sum(len(r.hypotheses[0]) for r in res)
    with open(path_out, "w", encoding="utf-8") as f:
        f.write("".join(" ".join(r.hypotheses[0]) + "\n" for r in res))
    print(f"{tokens} {seconds:.4f} {tokens / seconds:.1f}")


if __name__ == "__main__":
    main()
