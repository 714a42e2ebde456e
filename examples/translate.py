#!/usr/bin/env python3
"""Translates lines of stdin (or the arguments) with a clformer model directory, the way
`clformer translate -m` does, through the clformer Python package.

    pip install --no-build-isolation ./python     # after scripts/setup.sh
    echo "Could not open file." | python3 examples/translate.py -m models/en-de-gettext --beam 4
"""
import argparse
import sys

import clformer


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-m", "--model", default="models/en-de-gettext", help="model directory")
    p.add_argument("--device", default="cpu", choices=["cpu", "opencl", "auto"])
    p.add_argument("--beam", type=int, default=None, help="beam size (default: the model's)")
    p.add_argument("--n-best", type=int, default=1)
    p.add_argument("--batch", type=int, default=32, help="sentences decoded together")
    p.add_argument("--weight-type", choices=["f32", "f16", "bf16", "int8"], default=None)
    p.add_argument("sentences", nargs="*", help="sentences (default: the lines of stdin)")
    a = p.parse_args()

    try:
        translator = clformer.Translator(a.model, device=a.device, weight_type=a.weight_type)
        lines = a.sentences or (line.rstrip("\n") for line in sys.stdin)
        for result in translator.translate_iterable(lines, max_batch_size=a.batch,
                                                    beam_size=a.beam, num_hypotheses=a.n_best,
                                                    return_scores=a.n_best > 1):
            if a.n_best > 1:
                for score, text in zip(result.scores, result.text):
                    print(f"{score:.4f}\t{text}")
            else:
                print(result.text[0])
    except (ValueError, OSError, RuntimeError) as e:
        sys.exit(f"translate.py: {e}")


if __name__ == "__main__":
    main()
