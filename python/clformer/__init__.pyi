# Type stubs of the clformer package (the docstrings in __init__.py say more).
import os
from typing import Any, Iterable, Iterator, List, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt

__version__: str
LIB_DIR: str

Sentence = Union[str, bytes, Sequence[str]]

class TranslationResult:
    hypotheses: List[List[str]]
    scores: List[float]
    text: List[str]
    def __init__(self, hypotheses: List[List[str]], scores: List[float], text: List[str]) -> None: ...

class ScoringResult:
    log_prob: float
    tokens: int
    def __init__(self, log_prob: float, tokens: int) -> None: ...

class Translator:
    def __init__(
        self,
        model_dir: Union[str, os.PathLike[str]],
        device: str = "cpu",
        device_index: Union[int, str, None] = None,
        weight_type: Optional[str] = None,
        threads: int = 0,
        precision: Optional[str] = None,
    ) -> None: ...
    @property
    def model_dir(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def backend(self) -> str: ...
    @property
    def device_name(self) -> str: ...
    @property
    def weight_type(self) -> str: ...
    @property
    def precision(self) -> str: ...
    @property
    def source_languages(self) -> List[str]: ...
    @property
    def target_languages(self) -> List[str]: ...
    def tokenize(self, text: Union[str, bytes], target: bool = False) -> List[str]: ...
    def translate_batch(
        self,
        source: Sequence[Sentence],
        beam_size: Optional[int] = None,
        max_batch_size: int = 32,
        num_hypotheses: int = 1,
        return_scores: bool = False,
        length_penalty: Optional[float] = None,
        max_decoding_length: Optional[int] = None,
        source_lang: Optional[str] = None,
        target_lang: Optional[str] = None,
    ) -> List[TranslationResult]: ...
    def translate_iterable(
        self, source: Iterable[Sentence], max_batch_size: int = 32, **kwargs: Any
    ) -> Iterator[TranslationResult]: ...
    def score_batch(
        self,
        source: Sequence[Union[str, bytes]],
        target: Sequence[Union[str, bytes]],
        source_lang: Optional[str] = None,
        target_lang: Optional[str] = None,
    ) -> List[ScoringResult]: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Translator": ...
    def __exit__(self, *exc: Any) -> None: ...

class Model:
    def __init__(
        self,
        config: Union[str, os.PathLike[str]],
        weights: Union[str, os.PathLike[str], None] = None,
        device: str = "cpu",
        seed: int = 0,
        device_index: Union[int, str, None] = None,
        threads: int = 0,
    ) -> None: ...
    @property
    def src_vocab(self) -> int: ...
    @property
    def tgt_vocab(self) -> int: ...
    @property
    def max_len(self) -> int: ...
    @property
    def backend(self) -> str: ...
    def forward(
        self,
        src: npt.ArrayLike,
        tgt: npt.ArrayLike,
        out: Optional[npt.NDArray[np.float32]] = None,
    ) -> npt.NDArray[np.float32]: ...
    def close(self) -> None: ...
