// dist_torch._C: the factory torch.distributed calls for backend "dist".
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "process_group_dist.h"

namespace {

c10::intrusive_ptr<c10d::ProcessGroup> CreateProcessGroup(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout) {
  // dist's threads may call back into a store written in Python: let go of
  // the GIL while the group is made.
  pybind11::gil_scoped_release no_gil;
  return c10::make_intrusive<dist_torch::ProcessGroupDist>(store, rank, size, timeout);
}

std::string PluginName(const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  auto* dist = dynamic_cast<dist_torch::ProcessGroupDist*>(group.get());
  return dist != nullptr ? dist->PluginName() : "";
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  pybind11::module_::import("torch.distributed");  // registers ProcessGroup and Store
  m.doc() = "dist as a torch.distributed backend (use `import dist_torch`)";
  m.def("create_process_group", &CreateProcessGroup, pybind11::arg("store"), pybind11::arg("rank"),
        pybind11::arg("size"), pybind11::arg("timeout"));
  m.def("plugin_name", &PluginName, pybind11::arg("group"),
        "The dist plugin under a 'dist' process group ('gloo', 'shm', ...).");
}
