# SPDX-License-Identifier: Apache-2.0
"""setup.py - builds the xferd package: xferd._core over libxfer.

    pip install --no-build-isolation ./python
                                    (Debian: add --break-system-packages,
                                     or use a venv with --system-site-packages)
    make python / make install      (from the top of the tree)

Inside the xferd tree (../build/libxfer.a exists, or XFER_BUILD names a
build directory) libxfer is linked statically, so the extension needs
nothing installed; elsewhere it links the installed libxfer
(pkg-config libxfer).  Only Debian's python3-dev and python3-setuptools
are needed to build.  pyproject.toml names setuptools as the PEP 517
backend; offline, pass --no-build-isolation to pip (or --no-isolation to
python3 -m build) so that it uses the setuptools installed instead of
fetching one.
"""
import os
import subprocess

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
TREE = os.path.dirname(HERE)
BUILD = os.environ.get("XFER_BUILD") or os.path.join(TREE, "build")
LIBA = os.path.join(BUILD, "libxfer.a")

WARN = ["-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Wshadow",
        "-Wstrict-prototypes", "-Wmissing-prototypes",
        "-Wno-missing-field-initializers", "-Wno-cast-function-type"]

if os.path.exists(LIBA):
    include_dirs = [os.path.join(TREE, "include")]
    extra_objects = [LIBA]
    libraries = ["protobuf-c", "crypto", "dl"]
    # libxfer's symbols stay inside the extension: a process that also
    # loads libxfer.so.1 keeps its own copy.
    extra_link_args = ["-Wl,--exclude-libs,ALL", "-pthread"]
else:
    def pkg(flag):
        try:
            out = subprocess.check_output(["pkg-config", flag, "libxfer"],
                                          text=True)
        except (OSError, subprocess.CalledProcessError):
            raise SystemExit("xferd: libxfer not found: build the tree "
                             "(make) or install libxfer (make install)")
        return out.split()
    include_dirs = [f[2:] for f in pkg("--cflags") if f.startswith("-I")]
    extra_objects = []
    libraries = [f[2:] for f in pkg("--libs") if f.startswith("-l")]
    extra_link_args = [f for f in pkg("--libs") if f.startswith("-L")]
    extra_link_args += ["-Wl,-rpath," + f[2:] for f in extra_link_args]

setup(
    name="xferd",
    version="0.1.0",
    description="Python API of xferd, the per-node data-movement daemon",
    packages=["xferd"],
    package_data={"xferd": ["py.typed", "*.pyi"]},
    ext_modules=[Extension(
        "xferd._core",
        sources=["src/core.c", "src/context.c", "src/submit.c",
                 "src/completion.c", "src/region.c", "src/dlist.c",
                 "src/stream.c", "src/args.c"],
        depends=["src/core.h"],
        include_dirs=include_dirs,
        extra_objects=extra_objects,
        libraries=libraries,
        # Only PyInit__core leaves the extension (PyMODINIT_FUNC exports
        # it): calls between its files stay direct, not through the PLT,
        # and none of their names meets another library's.
        extra_compile_args=WARN + ["-fvisibility=hidden"],
        extra_link_args=extra_link_args,
    )],
    python_requires=">=3.9",
    zip_safe=False,
)
