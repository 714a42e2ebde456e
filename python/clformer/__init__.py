"""clformer: translate with a clformer model directory, or run a model's forward pass.

    import clformer
    translator = clformer.Translator("models/en-de-gettext")
    print(translator.translate_batch(["Could not open file."])[0].text[0])

The API follows CTranslate2's (Translator, translate_batch, translate_iterable,
score_batch) where clformer has the same thing; the differences are in the docstrings.
The work is done by libclformer (C), with the GIL released while a batch decodes.
"""
import errno
import itertools
import os
import threading



def _thread_wait_policy():
    """How idle worker threads wait, set before the CPU backend loads libgomp and OpenBLAS
    (as `clformer translate` does, tools/cli.h): OpenMP's threads spin ~3000 rounds before
    they sleep, OpenBLAS's own threads (a build on its pthreads variant) sleep at once.
    With libgomp's default (a long spin) every short loop of a decoding step waits for
    threads that hold the cores spinning: many times slower. A choice of the user's
    (OMP_WAIT_POLICY or GOMP_SPINCOUNT set) is left alone; a libgomp that another module
    loaded first keeps what it read then."""
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return
    os.environ["GOMP_SPINCOUNT"] = "3000"
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")


_thread_wait_policy()
from . import _clformer  # noqa: E402  (after the policy: it may load libgomp)

__all__ = ["Translator", "TranslationResult", "ScoringResult", "Model", "LIB_DIR"]
__version__ = "0.1.0"

#: Where the package's copy of libclformer, its backends (clformer-cpu.so,
#: clformer-opencl.so) and op plugins are: searched first for backends and plugins, then
#: the CLI's search path ($CLF_PLUGIN_PATH, the build tree, the install libdir).
LIB_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib")

_DEVICES = ("cpu", "opencl", "auto")
_WEIGHT_TYPES = ("f32", "f16", "bf16", "int8")
_PRECISIONS = ("f32", "bf16", "f16")


def _plugin_dir():
    return LIB_DIR if os.path.isdir(LIB_DIR) else None


def _check_device(device, device_index):
    """The backend name and its device string (None: the backend's default)."""
    if not isinstance(device, str):
        raise TypeError(f"device must be a str, not {type(device).__name__}")
    if device not in _DEVICES:
        raise ValueError(f"unknown device {device!r}: one of {', '.join(_DEVICES)}")
    if device_index is None:
        return device, None
    if isinstance(device_index, bool) or not isinstance(device_index, (int, str)):
        raise TypeError("device_index must be an int (an index) or a str (part of the "
                        f"device's name), not {type(device_index).__name__}")
    if isinstance(device_index, int) and device_index < 0:
        raise ValueError(f"device_index must be >= 0, not {device_index}")
    return device, str(device_index)


def _check_int(name, value, low, allow_none=True):
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, not {value}")


class TranslationResult:
    """One sentence's translation.

    hypotheses: the num_hypotheses best hypotheses, best first, each a list of target
        tokens (the target vocabulary's pieces, specials left out), as CTranslate2 gives.
    scores: each hypothesis' score (its log-probability over the length penalty, what
        beams are ranked by) when return_scores, else [].
    text: each hypothesis detokenized (what `clformer translate` prints). CTranslate2 has
        no such field: its user detokenizes the tokens; clformer's translator does it
        with the model's own tokenizer.
    """

    __slots__ = ("hypotheses", "scores", "text")

    def __init__(self, hypotheses, scores, text):
        self.hypotheses = hypotheses
        self.scores = scores
        self.text = text

    def __repr__(self):
        return (f"TranslationResult(hypotheses={self.hypotheses!r}, scores={self.scores!r}, "
                f"text={self.text!r})")

    def __eq__(self, other):
        return (isinstance(other, TranslationResult) and self.hypotheses == other.hypotheses
                and self.scores == other.scores and self.text == other.text)


class ScoringResult:
    """The score of one (source, target) pair.

    log_prob: the sum of the log-probabilities the model gives the target's tokens and
        the final end-of-sentence token, after the source (teacher forcing).
    tokens: how many tokens were scored (the end token included). CTranslate2's
        ScoringResult has the tokens themselves and a log-probability per token instead.
    """

    __slots__ = ("log_prob", "tokens")

    def __init__(self, log_prob, tokens):
        self.log_prob = log_prob
        self.tokens = tokens

    def __repr__(self):
        return f"ScoringResult(log_prob={self.log_prob!r}, tokens={self.tokens!r})"


class Translator:
    """A model directory opened for translation (clformer/translator.h).

    Translator(model_dir, device="cpu", device_index=None, weight_type=None, threads=0,
               precision=None)

    model_dir: an imported model's directory (`clformer import marian`) or a training
        run's checkpoint directory, as `clformer translate -m` takes.
    device: the backend: "cpu", "opencl" or "auto" (OpenCL on a GPU when there is one).
    device_index: the backend's device: an int is its index in `clformer devices`'
        list, a str a part of its name; None (the default) is the backend's own choice
        (OpenCL: the first GPU). CTranslate2's default is 0: here 0 is the first device
        of all platforms, which may not be the first GPU.
    weight_type: "f32", "f16", "bf16" or "int8" (CTranslate2's compute_type); None: the
        weights file's own type.
    threads: CPU threads; 0: the config's backend.threads (0 there: all cores).
    precision: "f32", "bf16" or "f16": what the products of many rows (the encoder, batched
        decoding) take as inputs, summed in F32 (docs/PRECISION.md); where the backend
        lacks the arithmetic they run F32 (the note is in .info); None: f32.

    A Translator may be shared by threads: calls on it run one at a time (a lock per
    translator), each with the GIL released while it decodes, and all on the translator's
    own thread, so that a pool of threads costs what one thread does (libgomp keeps OpenMP
    workers per calling thread). One made before os.fork() raises RuntimeError in the
    child: make it there.
    """

    def __init__(self, model_dir, device="cpu", device_index=None, weight_type=None,
                 threads=0, precision=None):
        if not isinstance(model_dir, (str, os.PathLike)):
            raise TypeError(f"model_dir must be a str or path, not {type(model_dir).__name__}")
        model_dir = os.fspath(model_dir)
        if isinstance(model_dir, bytes):
            model_dir = os.fsdecode(model_dir)
        backend, dev = _check_device(device, device_index)
        if weight_type is not None and weight_type not in _WEIGHT_TYPES:
            raise ValueError(f"unknown weight_type {weight_type!r}: one of "
                             f"{', '.join(_WEIGHT_TYPES)} or None")
        if precision is not None and precision not in _PRECISIONS:
            raise ValueError(f"unknown precision {precision!r}: one of "
                             f"{', '.join(_PRECISIONS)} or None")
        _check_int("threads", threads, 0, allow_none=False)
        if not os.path.isdir(model_dir):
            raise FileNotFoundError(errno.ENOENT, "model directory not found", model_dir)
        self._model_dir = model_dir
        self._device = device
        self._impl = _clformer._Translator(model_dir, backend=backend, device=dev,
                                           plugin_dir=_plugin_dir(),
                                           threads=threads if threads > 0 else -1,
                                           weight_type=weight_type, precision=precision)
        self._info = self._impl.info()

    @property
    def model_dir(self):
        """The model directory this translator opened."""
        return self._model_dir

    @property
    def device(self):
        """The device argument ("cpu", "opencl" or "auto")."""
        return self._device

    @property
    def backend(self):
        """The backend that was opened ("cpu" or "opencl")."""
        return self._info["backend"]

    @property
    def device_name(self):
        """The backend's description of its device."""
        return self._info["device"]

    @property
    def weight_type(self):
        """The type the model multiplies with ("f32", "f16", "bf16", "int8")."""
        return self._info["weight_type"]

    @property
    def precision(self):
        """What the products of many rows take as inputs ("f32", "bf16", "f16")."""
        return self._info["precision"]

    @property
    def source_languages(self):
        """The source languages the model's config lists ([] when it lists none)."""
        return list(self._info["source_languages"])

    @property
    def target_languages(self):
        """The target languages the model's config lists ([] when it lists none)."""
        return list(self._info["target_languages"])

    def close(self):
        """Frees the model now (otherwise when the Translator is garbage-collected)."""
        self._impl.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def tokenize(self, text, target=False):
        """The tokens the model's tokenizer gives text (a str), without the framing
        (no begin/end tokens): what translate_batch takes as a list of tokens.
        target: the target side's tokenizer instead of the source's."""
        return self._impl.tokenize(text, side=bool(target))

    def translate_batch(self, source, beam_size=None, max_batch_size=32, num_hypotheses=1,
                        return_scores=False, length_penalty=None, max_decoding_length=None,
                        source_lang=None, target_lang=None):
        """Translates a list of sentences; returns a TranslationResult per sentence.

        source: a list of str (or UTF-8 bytes) sentences, tokenized by the model's own
            tokenizer, or a list of lists of source tokens (the source vocabulary's
            pieces; a token not in it raises ValueError).
        beam_size: 1 is greedy; None: the model's generate.beam (1 when absent).
            CTranslate2's default is 2 whatever the model.
        max_batch_size: sentences decoded together, in input order.
        num_hypotheses: hypotheses per sentence, 1..beam_size.
        return_scores: fill each result's scores (greedy hypotheses are then scored
            by one teacher-forced forward pass per batch: the argmax runs on the device
            and sums nothing).
        length_penalty: the GNMT alpha (score = logprob / ((5 + len) / 6) ** alpha); None:
            the model's generate.length_penalty, else 0.6 with a beam and 0 greedy.
        max_decoding_length: output tokens at most; None: 2 x the batch's longest source +
            10, capped at the model's max_len - 1. Give it for outputs that do not depend
            on how sentences are batched.
        source_lang, target_lang: for a many-language model (M2M-100, NLLB, mBART-50:
            source_languages and target_languages list its codes), the languages of this
            call; they stay set for later calls until given again. None: the ones set
            before (such a model refuses to translate until both are set). A code the
            model lacks raises ValueError; so does a language for a model without
            language tokens.

        An empty or blank sentence gives one empty hypothesis. A sentence that is not
        valid UTF-8, holds a NUL, is longer than 1 MiB or than the model's max_len raises
        ValueError naming its index and why (nothing of the call is returned).
        """
        _check_int("beam_size", beam_size, 1)
        _check_int("max_batch_size", max_batch_size, 1, allow_none=False)
        _check_int("num_hypotheses", num_hypotheses, 1, allow_none=False)
        _check_int("max_decoding_length", max_decoding_length, 1)
        if length_penalty is not None and (isinstance(length_penalty, bool) or
                                           not isinstance(length_penalty, (int, float))):
            raise TypeError(f"length_penalty must be a float, not {type(length_penalty).__name__}")
        if isinstance(source, (str, bytes)):
            raise TypeError("source must be a list of sentences, not a single "
                            f"{type(source).__name__}")
        raw = self._impl.translate(source, beam=-1 if beam_size is None else beam_size,
                                   n_best=num_hypotheses, length_penalty=length_penalty,
                                   max_len=max_decoding_length or 0,
                                   max_batch=max_batch_size,
                                   want_scores=bool(return_scores),
                                   source_lang=source_lang, target_lang=target_lang)
        results = []
        for hyps in raw:
            results.append(TranslationResult([h[0] for h in hyps],
                                             [h[2] for h in hyps] if return_scores else [],
                                             [h[1] for h in hyps]))
        return results

    def translate_iterable(self, source, max_batch_size=32, **kwargs):
        """Translates a stream of sentences lazily: reads max_batch_size of them,
        translates them with translate_batch(**kwargs), yields their results in order,
        and so on. Give max_decoding_length for results that do not depend on where the
        stream is cut into batches."""
        _check_int("max_batch_size", max_batch_size, 1, allow_none=False)
        it = iter(source)
        while True:
            batch = list(itertools.islice(it, max_batch_size))
            if not batch:
                return
            yield from self.translate_batch(batch, max_batch_size=max_batch_size, **kwargs)

    def score_batch(self, source, target, source_lang=None, target_lang=None):
        """Scores given translations: a ScoringResult per (source[i], target[i]) pair.

        source, target: lists of str sentences of the same length (the model's tokenizer
        tokenizes them; CTranslate2 takes lists of tokens here, which this version does
        not). A pair that cannot be scored raises ValueError naming it and why.
        source_lang, target_lang: as translate_batch's.
        """
        if isinstance(source, (str, bytes)) or isinstance(target, (str, bytes)):
            raise TypeError("source and target must be lists of sentences")
        return [ScoringResult(lp, n) for lp, n in
                self._impl.score(source, target, source_lang=source_lang, target_lang=target_lang)]

    def __repr__(self):
        return (f"clformer.Translator({self._model_dir!r}, device={self._device!r}, "
                f"backend={self.backend!r}, weight_type={self.weight_type!r})")


class Model:
    """A model from a YAML config on a backend, for its forward pass (clformer/model.h).

    Model(config, weights=None, device="cpu", seed=0, device_index=None, threads=0)

    config: a clformer YAML (its model: section; plugins: are loaded).
    weights: a safetensors file under the tutorial PyTorch names; None: initialised from
        seed (the same seed gives the same weights on any machine).
    device, device_index, threads: as Translator's; like a Translator it computes on a
    thread of its own (threads and os.fork(): as Translator's docstring says).
    """

    def __init__(self, config, weights=None, device="cpu", seed=0, device_index=None,
                 threads=0):
        config = os.fspath(config)
        if weights is not None:
            weights = os.fspath(weights)
        backend, dev = _check_device(device, device_index)
        _check_int("seed", seed, 0, allow_none=False)
        _check_int("threads", threads, 0, allow_none=False)
        for path in (config, weights):
            if path is not None and not os.path.isfile(path):
                raise FileNotFoundError(errno.ENOENT, "file not found", path)
        self._impl = _clformer._Model(config, weights=weights, backend=backend, device=dev,
                                      plugin_dir=_plugin_dir(), seed=seed, threads=threads)
        self._info = self._impl.info()

    @property
    def src_vocab(self):
        return self._info["src_vocab"]

    @property
    def tgt_vocab(self):
        return self._info["tgt_vocab"]

    @property
    def max_len(self):
        return self._info["max_len"]

    @property
    def backend(self):
        return self._info["backend"]

    def forward(self, src, tgt, out=None):
        """The logits [B, T, tgt_vocab] float32 (log-probabilities for output:
        log_softmax) of the decoder inputs tgt [B, T] after the sources src [B, S]
        (int32 token ids; other integer arrays are converted). Nothing is copied when
        src and tgt are C-contiguous int32; out, when given, is a C-contiguous float32
        array of that shape that receives the logits (it is returned)."""
        import numpy as np

        src, tgt = np.asarray(src), np.asarray(tgt)
        for name, a in (("src", src), ("tgt", tgt)):
            if not np.issubdtype(a.dtype, np.integer):
                raise TypeError(f"{name} must hold integer token ids, not {a.dtype}")
            if a.size and (a.min() < np.iinfo(np.int32).min or a.max() > np.iinfo(np.int32).max):
                raise ValueError(f"{name} holds ids beyond int32")
        src = np.ascontiguousarray(src, dtype=np.int32)
        tgt = np.ascontiguousarray(tgt, dtype=np.int32)
        if src.ndim != 2 or tgt.ndim != 2:
            raise ValueError(f"src and tgt must be 2-D [B, S] and [B, T], not {src.ndim}-D "
                             f"and {tgt.ndim}-D")
        if out is None:
            out = np.empty((src.shape[0], tgt.shape[1], self.tgt_vocab), dtype=np.float32)
        self._impl.forward_into(src, tgt, out)
        return out

    def close(self):
        """Frees the model and its backend now."""
        self._impl.close()
