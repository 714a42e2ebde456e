#!/usr/bin/env python3
"""Writes tests/fixtures/clean_up_spaces.json: transformers' clean_up_tokenization (4.40,
PreTrainedTokenizerBase), which decode() applies to the text when the tokenizer's
clean_up_tokenization_spaces is true, on strings that exercise each of its replacements, their
order and Python's left-to-right, non-overlapping str.replace. test_detokenize.c checks
clf_text_clean_up_spaces against it.

    /work/venv-ct2/bin/python tests/reference/make_clean_up_fixture.py
"""
import json
import os

import transformers
from transformers import PreTrainedTokenizerBase

CASES = [
    "", " ", ".", " .", "  .", "Hello , world .", "Where is it ?", "Stop !", "a ,b , c",
    "it ' s", "a ' ' b", "a ' ' ' b", "' ", " '", "I don 't know", "I can n't", "I 'm here",
    "John 's book", "we 've gone", "they 're", "x 're 've 'm 's n't", "n't 's", " n't",
    "Das ist gut . Ja ?", "Ça va , merci !", "日本 。 ok .", "tabs\t.\t,", "a\u00a0.",
    "end .", ". . .", " . . ", "a  ,  b", "''", " ' s", "the cat 's  toy", "1 , 2 , 3 .",
    "don 't , won 't !", "'m", " 'm", "x 'mm", "x 'sa",
]


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures",
                       "clean_up_spaces.json")
    cases = [[s, PreTrainedTokenizerBase.clean_up_tokenization(s)] for s in CASES]
    with open(out, "w", encoding="utf-8") as f:  # a case a line
        f.write('{"transformers": "%s", "cases": [\n' % transformers.__version__)
        f.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in cases))
        f.write("\n]}\n")


if __name__ == "__main__":
    main()
