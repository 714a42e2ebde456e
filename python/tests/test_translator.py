"""clformer.Translator against the CLI: `clformer translate -m models/en-de-gettext` on the
same sentences gives the same lines (greedy, beam 4, a given max_len, n-best scores)."""
import os
import shutil
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import clformer
from conftest import CLI, MODEL_DIR

with open(os.path.join(MODEL_DIR, "valid.en"), encoding="utf-8") as f:
    SENTENCES = [line.rstrip("\n") for line in f][:24]


def cli(args, lines):
    """The CLI's output lines for lines (one per input; n-best: N per input)."""
    r = subprocess.run([CLI, "translate", "-m", MODEL_DIR] + args, input="\n".join(lines) + "\n",
                       capture_output=True, text=True, timeout=300, check=True)
    return r.stdout.splitlines()


@pytest.mark.parametrize("beam", [1, 4])
def test_same_as_cli(translator, beam):
    ref = cli(["--beam", str(beam)], SENTENCES)
    got = translator.translate_batch(SENTENCES, beam_size=beam)
    assert len(got) == len(SENTENCES)
    assert [r.text[0] for r in got] == ref
    # hypotheses are the target vocabulary's pieces: joined, specials left out, they are
    # the text again
    for r in got:
        pieces = [p for p in r.hypotheses[0] if p != "<unk>"]
        assert "".join(pieces).replace("\u2581", " ").strip() == r.text[0]


def test_same_as_cli_max_len_and_batches(translator):
    ref = cli(["--beam", "4", "--max-len", "12", "--batch", "7"], SENTENCES)
    got = translator.translate_batch(SENTENCES, beam_size=4, max_decoding_length=12,
                                     max_batch_size=7)
    assert [r.text[0] for r in got] == ref
    assert all(len(r.hypotheses[0]) <= 12 for r in got)
    # with max_len given, batching does not change the results
    it = list(translator.translate_iterable(iter(SENTENCES), max_batch_size=5, beam_size=4,
                                            max_decoding_length=12))
    assert [r.text[0] for r in it] == ref


def test_n_best_scores_as_cli(translator):
    some = SENTENCES[:8]
    ref = cli(["--beam", "4", "--n-best", "3"], some)
    got = translator.translate_batch(some, beam_size=4, num_hypotheses=3, return_scores=True)
    assert len(ref) == 3 * len(some)
    for i, r in enumerate(got):
        assert len(r.hypotheses) == len(r.scores) == len(r.text) == 3
        assert r.scores == sorted(r.scores, reverse=True)
        for k in range(3):
            score, text = ref[3 * i + k].split("\t", 1)
            assert r.text[k] == text
            assert abs(r.scores[k] - float(score)) <= 1e-4 * max(1.0, abs(float(score)))
    assert translator.translate_batch(some)[0].scores == []


def test_tokens_in_tokens_out(translator):
    toks = [translator.tokenize(s) for s in SENTENCES[:6]]
    assert all(toks) and all(isinstance(t, str) for s in toks for t in s)
    by_text = translator.translate_batch(SENTENCES[:6], beam_size=2)
    by_tokens = translator.translate_batch(toks, beam_size=2)
    assert by_tokens == by_text
    by_tuples = translator.translate_batch([tuple(t) for t in toks], beam_size=2)
    assert by_tuples == by_text


def test_empty_and_bytes(translator):
    r = translator.translate_batch(["", "   ", SENTENCES[0].encode()])
    assert r[0].text == [""] and r[0].hypotheses == [[]]
    assert r[1].text == [""]
    assert r[2].text[0] == translator.translate_batch([SENTENCES[0]])[0].text[0]
    assert translator.translate_batch([]) == []
    assert list(translator.translate_iterable([])) == []


def test_properties(translator):
    assert translator.model_dir == MODEL_DIR
    assert translator.device == "cpu" and translator.backend == "cpu"
    assert translator.weight_type == "f16"  # the shipped weights file's type
    assert translator.precision == "f32"
    # the shipped model's config: languages: {source: [en], target: [de]}
    assert translator.source_languages == ["en"] and translator.target_languages == ["de"]
    assert "cpu" in repr(translator)


def test_weight_type_int8_translates():
    t = clformer.Translator(MODEL_DIR, weight_type="int8", threads=1)
    assert t.weight_type == "int8"
    ref = cli(["--weight-type", "int8", "--threads", "1"], SENTENCES[:4])
    assert [r.text[0] for r in t.translate_batch(SENTENCES[:4])] == ref
    t.close()
    with pytest.raises(RuntimeError, match="closed"):
        t.translate_batch(["a"])


def test_precision_bf16_translates_as_the_cli():
    """precision="bf16" gives the CLI's --precision bf16 lines (BF16 products where the CPU
    has them, else F32 with the note), and says what it opened."""
    t = clformer.Translator(MODEL_DIR, weight_type="f32", precision="bf16", threads=1)
    assert t.precision == "bf16"
    ref = cli(["--weight-type", "f32", "--precision", "bf16", "--threads", "1"], SENTENCES[:8])
    assert [r.text[0] for r in t.translate_batch(SENTENCES[:8])] == ref
    t.close()


def test_score_batch(translator):
    src = SENTENCES[:5]
    # beam 2 without length penalty: a hypothesis' score is its log-probability
    best = translator.translate_batch(src, beam_size=2, return_scores=True, length_penalty=0)
    scored = translator.score_batch(src, [r.text[0] for r in best])
    assert len(scored) == 5
    for r, s in zip(best, scored):
        assert s.tokens == len(r.hypotheses[0]) + 1  # and the end token
        assert s.log_prob < 0
        assert abs(s.log_prob - r.scores[0]) <= 1e-3 * max(1.0, abs(r.scores[0]))
    # a worse translation scores lower
    other = translator.score_batch(src[:1], ["Das ist ganz falsch."])[0]
    assert other.log_prob < scored[0].log_prob
    assert translator.score_batch([], []) == []
    with pytest.raises(ValueError):
        translator.score_batch(src[:2], src[:1])


def test_greedy_scores(translator):
    """Greedy decoding takes the argmax on the device; with return_scores its hypotheses
    are scored by teacher forcing (the C suite compares that with the decoder's own sums):
    the text does not change, and a finished hypothesis' score is score_batch's."""
    src = SENTENCES[:6]
    plain = translator.translate_batch(src, beam_size=1)
    got = translator.translate_batch(src, beam_size=1, return_scores=True, length_penalty=0)
    assert [r.text for r in got] == [r.text for r in plain]
    scored = translator.score_batch(src, [r.text[0] for r in got])
    for r, s in zip(got, scored):
        assert len(r.scores) == 1 and r.scores[0] < 0
        assert abs(s.log_prob - r.scores[0]) <= 1e-3 * max(1.0, abs(r.scores[0]))
    assert translator.translate_batch(src[:1], return_scores=True)[0].scores[0] < 0


def test_two_threads_same_results(translator):
    ref = [r.text[0] for r in translator.translate_batch(SENTENCES, beam_size=2,
                                                          max_decoding_length=20)]
    out, errors = {}, []

    def work(k):
        try:
            for _ in range(2):
                got = translator.translate_batch(SENTENCES, beam_size=2, max_decoding_length=20)
                out.setdefault(k, []).append([r.text[0] for r in got])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert all(r == ref for k in out for r in out[k]) and len(out) == 2


def test_gil_released_while_decoding(translator):
    """A Python thread runs while another one decodes: the GIL is released."""
    done = threading.Event()
    ticks = 0

    def decode():
        translator.translate_batch(SENTENCES, beam_size=4)
        done.set()

    t = threading.Thread(target=decode)
    t.start()
    while not done.is_set():
        ticks += 1
    t.join()
    # holding the GIL for the whole batch would leave this loop a few switch intervals
    assert ticks > 10000


def test_languages_from_config(tmp_path):
    for name in os.listdir(MODEL_DIR):
        shutil.copyfile(os.path.join(MODEL_DIR, name), tmp_path / name)
    with open(tmp_path / "model.yaml", encoding="utf-8") as f:
        yaml = [line for line in f if not line.startswith("languages:")]
    with open(tmp_path / "model.yaml", "w", encoding="utf-8") as f:
        f.writelines(yaml)
    assert clformer.Translator(tmp_path).source_languages == []  # none listed
    with open(tmp_path / "model.yaml", "a", encoding="utf-8") as f:
        f.write("languages: {source: en, target: [de, de-AT]}\n")
    t = clformer.Translator(tmp_path)
    assert t.source_languages == ["en"] and t.target_languages == ["de", "de-AT"]
    assert t.translate_batch(SENTENCES[:2]) == clformer.Translator(MODEL_DIR).translate_batch(
        SENTENCES[:2])


def test_opencl_as_cli():
    """The OpenCL backend (PoCL in CI) through Python gives the CLI's lines on it."""
    try:
        t = clformer.Translator(MODEL_DIR, device="opencl")
    except RuntimeError as e:
        if os.environ.get("CLF_TEST_REQUIRE_OPENCL", "1") == "0":
            pytest.skip(f"no OpenCL here: {e}")
        raise
    assert t.backend == "opencl"
    for beam in (1, 4):
        ref = cli(["--backend", "opencl", "--beam", str(beam)], SENTENCES[:8])
        assert [r.text[0] for r in t.translate_batch(SENTENCES[:8], beam_size=beam)] == ref


def test_languages_per_call(tmp_path):
    """A many-language model (the M2M-100 fixture, imported by the CLI): each call's
    source_lang/target_lang give the CLI's lines for --source-lang/--target-lang, both
    targets from one Translator; the languages stay set for a later call; a code the model
    lacks, a model refusing to translate before both are set, and a language for a model
    without language tokens raise ValueError."""
    fixture = os.path.join(os.path.dirname(MODEL_DIR), "..", "tests", "fixtures", "m2m100")
    model = tmp_path / "m2m100"
    subprocess.run([CLI, "import", os.path.join(fixture, "hf"), "-o", str(model)], check=True,
                   capture_output=True, timeout=120)
    with open(os.path.join(fixture, "sentences.txt"), encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f][:8]
    t = clformer.Translator(model)
    assert "de" in t.target_languages and "fr" in t.target_languages
    with pytest.raises(ValueError, match="language"):
        t.translate_batch(lines[:1])
    for lang in ("de", "fr", "de"):
        want = subprocess.run([CLI, "translate", "-m", str(model), "--source-lang", "en",
                               "--target-lang", lang, "--beam", "1"],
                              input="\n".join(lines) + "\n", capture_output=True, text=True,
                              timeout=300, check=True).stdout.splitlines()
        got = t.translate_batch(lines, beam_size=1, source_lang="en", target_lang=lang)
        assert [r.text[0] for r in got] == want, lang
        assert all(r.hypotheses[0][0] == f"__{lang}__" for r in got)  # the forced token
    again = t.translate_batch(lines, beam_size=1)  # still en -> de
    assert [r.text[0] for r in again] == [r.text[0] for r in got]
    scored = t.score_batch(lines[:2], ["a b", "c"], source_lang="en", target_lang="fr")
    assert len(scored) == 2 and all(s.log_prob < 0 for s in scored)
    with pytest.raises(ValueError, match="qq"):
        t.translate_batch(lines[:1], target_lang="qq")
    with pytest.raises(TypeError):
        t.translate_batch(lines[:1], target_lang=7)
    with pytest.raises(ValueError, match="language"):
        clformer.Translator(MODEL_DIR).translate_batch(["Hello"], target_lang="de")


def _threads():
    return len(os.listdir("/proc/self/task"))


def test_pool_threads_share_one_openmp_team():
    """Every computing call runs on the translator's own thread (py_common.h): Python
    threads that translate leave no OpenMP team of their own behind them (libgomp keeps one
    per thread that ran a parallel region, and more teams than cores make every region
    wait in the kernel). threads=2: the translator's thread and one OpenMP worker."""
    before = _threads()
    t = clformer.Translator(MODEL_DIR, threads=2)
    want = [r.text[0] for r in t.translate_batch(SENTENCES[:4])]
    assert _threads() == before + 2
    barrier = threading.Barrier(4)

    def work(s):
        barrier.wait()  # the four threads all alive, each translating
        return t.translate_batch([s])[0].text[0]

    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(work, SENTENCES[:4]))
        assert _threads() == before + 2 + 4
    assert got == want
    t.close()
    # the OpenMP worker ends after the translator's thread, not joined by it
    end = time.time() + 10
    while _threads() > before and time.time() < end:
        time.sleep(0.01)
    assert _threads() == before


def test_forked_child_gets_an_error():
    """A translator made before a fork has no compute thread in the child: a clear
    RuntimeError there, not a hang; the parent's goes on working."""
    t = clformer.Translator(MODEL_DIR, threads=1)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            t.translate_batch(SENTENCES[:1])
            msg = b"no error"
        except RuntimeError as e:
            msg = str(e).encode()
        except BaseException as e:  # noqa: BLE001
            msg = repr(e).encode()
        os.write(w, msg)
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        msg = f.read().decode()
    assert os.waitpid(pid, 0)[1] == 0
    assert "forked" in msg and "make it in this process" in msg, msg
    assert t.translate_batch(SENTENCES[:1])[0].text[0]
    t.close()
