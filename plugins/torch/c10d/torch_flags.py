"""Prints what a C++ extension needs to build against the torch of the
interpreter that runs this (plugins/python/tntcomm/meson.build reads it),
one item a line, its key and value apart by a tab:

    version <torch.__version__>
    abi <0|1>                  (torch._C._GLIBCXX_USE_CXX11_ABI)
    include <dir>              (torch.utils.cpp_extension.include_paths():
                                torch's headers and its own pybind11)
    libdir <dir>               (torch.utils.cpp_extension.library_paths())

Exits 1 with one line on stderr when torch is missing or too old (the
backend derives from c10d::Backend, which torch has since 2.0)."""
import sys


def main():
    try:
        import torch
        import torch.distributed
        from torch.utils import cpp_extension
    except ImportError as e:
        sys.exit("torch is not importable by %s (%s)" % (sys.executable, e))
    major = int(torch.__version__.split(".")[0])
    if major < 2:
        sys.exit("torch %s by %s is older than 2.0" %
                 (torch.__version__, sys.executable))
    if not torch.distributed.is_available():
        sys.exit("torch %s by %s is built without torch.distributed" %
                 (torch.__version__, sys.executable))
    print("version\t" + torch.__version__)
    print("abi\t%d" % int(torch._C._GLIBCXX_USE_CXX11_ABI))
    for d in cpp_extension.include_paths():
        print("include\t" + d)
    for d in cpp_extension.library_paths():
        print("libdir\t" + d)


if __name__ == "__main__":
    main()
