"""Builds clformer._clformer against the CMake build of libclformer.

The build tree is $CLFORMER_BUILD_DIR, else ../build next to this directory (what
scripts/setup.sh builds). Its libclformer.so.<N> and the backends and op plugins of
lib/clformer/ are copied into the package (clformer/lib/); the extension finds the
library through its rpath $ORIGIN/lib, and clformer passes that directory as the plugin
directory, so the installed package does not depend on the build tree staying in place.
"""
import glob
import os
import shutil
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.path.abspath(os.environ.get("CLFORMER_BUILD_DIR") or os.path.join(ROOT, "build"))
LIBDIR = os.path.join(BUILD, "lib")
INCLUDE = os.path.join(ROOT, "core", "include")


def fail(msg):
    sys.exit("clformer setup.py: " + msg)


def soname_file():
    """libclformer.so.<major> (the name the extension records) in the build tree."""
    libs = sorted(p for p in glob.glob(os.path.join(LIBDIR, "libclformer.so.*"))
                  if p.count(".so.") == 1 and p.rsplit(".so.", 1)[1].isdigit())
    if not libs:
        fail(f"no libclformer.so.<N> in {LIBDIR}: build clformer first (scripts/setup.sh, or "
             f"cmake -S . -B build && cmake --build build), or set CLFORMER_BUILD_DIR")
    return libs[0]


class BuildExt(build_ext):
    """build_ext that also copies the library, backends and plugins into clformer/lib."""

    def run(self):
        super().run()
        dests = [os.path.join(self.build_lib, "clformer", "lib")]
        if self.inplace:
            dests.append(os.path.join(HERE, "clformer", "lib"))
        plugins = sorted(glob.glob(os.path.join(LIBDIR, "clformer", "clformer-*.so")))
        if not any(os.path.basename(p) == "clformer-cpu.so" for p in plugins):
            fail(f"no clformer-cpu.so in {os.path.join(LIBDIR, 'clformer')}: build clformer first")
        for dest in dests:
            os.makedirs(dest, exist_ok=True)
            for src in [soname_file()] + plugins:
                # the file a symlink names, under the symlink's name, with its mode
                shutil.copy(src, os.path.join(dest, os.path.basename(src)))


# CLFORMER_SANITIZE=1 (scripts/test-python.sh on a CLF_SANITIZE tree): the extension is
# instrumented as libclformer is.
SANITIZE = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer",
            "-fno-sanitize-recover=undefined"] if os.environ.get("CLFORMER_SANITIZE") == "1" else []

soname_file()  # fail early, with the fix, when the build tree is missing
ext = Extension(
    "clformer._clformer",
    sources=[os.path.join("src", f) for f in
             ("clformer_module.c", "py_common.c", "py_translator.c", "py_model.c")],
    include_dirs=[INCLUDE],
    # rebuilt when a public header changes (a struct's layout is part of the ABI it uses)
    depends=sorted(glob.glob(os.path.join(INCLUDE, "clformer", "*.h")))
    + [os.path.join("src", "py_common.h")],
    library_dirs=[LIBDIR],
    libraries=["clformer"],
    extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Werror", "-Wno-missing-field-initializers"] + SANITIZE,
    extra_link_args=["-Wl,-rpath,$ORIGIN/lib"] + SANITIZE[:1],
)
# Build outputs go into the CMake build tree, not the source tree: a plain and a sanitized
# build tree then never share objects.
OUT = os.path.join(BUILD, "python")
os.makedirs(OUT, exist_ok=True)
setup(ext_modules=[ext], cmdclass={"build_ext": BuildExt},
      options={"build": {"build_base": os.path.join(OUT, "build")},
               "egg_info": {"egg_base": OUT}})
