"""The installed package uses its own copies of libclformer and the backends (clformer/lib),
not the build tree's."""
import os

import clformer
from conftest import BUILD, MODEL_DIR


def loaded(name):
    with open("/proc/self/maps") as f:
        return {line.split()[-1] for line in f if line.rstrip().endswith(name)}


def test_libraries_from_the_package():
    clformer.Translator(MODEL_DIR).translate_batch(["Save"])
    for name in ("libclformer.so.0", "clformer-cpu.so"):
        paths = loaded(name)
        assert paths, f"{name} not loaded"
        for p in paths:
            assert os.path.dirname(p) == clformer.LIB_DIR, p
            assert not p.startswith(BUILD + os.sep + "lib"), p
    assert os.path.isfile(os.path.join(os.path.dirname(clformer.__file__), "__init__.pyi"))
