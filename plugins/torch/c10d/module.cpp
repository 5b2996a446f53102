// tntcomm._c10d: the Python module that gives torch.distributed the "tnt"
// backend. tntcomm.torch registers it with
// torch.distributed.Backend.register_backend on import; torch wraps each
// ProcessGroupTnt in its own ProcessGroup. The class names torch's
// c10d::Backend as its base, which pybind11 finds in torch's own module:
// that needs this module built with torch's pybind11 (the same
// "internals"), which the build takes from torch's include paths.
#include <torch/python.h>

#include "process_group_tnt.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_c10d, m)
{
    m.doc() = "The torch.distributed backend \"tnt\" over libtntcomm";
    py::module::import("torch._C._distributed_c10d");  // registers Backend
    py::class_<tnt_torch::ProcessGroupTnt, c10d::Backend,
               c10::intrusive_ptr<tnt_torch::ProcessGroupTnt>>(
        m, "ProcessGroupTnt")
        .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store,
                         int rank, int size, double timeout_s) {
                 return c10::make_intrusive<tnt_torch::ProcessGroupTnt>(
                     store, rank, size,
                     std::chrono::milliseconds(
                         static_cast<int64_t>(timeout_s * 1000.0)));
             }),
             py::arg("store"), py::arg("rank"), py::arg("size"),
             py::arg("timeout_s"),
             // Rendezvous and connection set-up block: let other Python
             // threads run meanwhile.
             py::call_guard<py::gil_scoped_release>());
}
