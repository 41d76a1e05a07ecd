// ringtrain._ringtrain: the facade of <ringtrain/ringtrain.h> for Python. Buffers come as
// addresses and element counts (ringtrain.torch passes tensors' data_ptr(), ringtrain's own
// functions NumPy arrays, after checking them in Python). Every call that may wait for other
// ranks releases the GIL, so that Python threads (and autograd's hooks) run meanwhile.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "ringtrain/ringtrain.h"

namespace py = pybind11;

namespace {

using Address = std::uintptr_t;

void* pointer(Address address) {
  return reinterpret_cast<void*>(address);
}

// Options from keyword arguments; None leaves the field (and the RINGTRAIN_* variable) alone.
ringtrain::Options options(std::optional<ringtrain::Backend> backend,
                           std::optional<ringtrain::Compression> compression,
                           std::optional<std::size_t> fusionThresholdBytes,
                           std::optional<bool> overlap, std::optional<std::string> tuningFile,
                           std::optional<double> stallTimeoutSeconds) {
  ringtrain::Options o;
  if (backend) o.backend = *backend;
  if (compression) o.compression = *compression;
  if (fusionThresholdBytes) o.fusionThresholdBytes = *fusionThresholdBytes;
  if (overlap) o.overlap = *overlap;
  if (tuningFile) o.tuningFile = *tuningFile;
  if (stallTimeoutSeconds) o.stallTimeoutSeconds = *stallTimeoutSeconds;
  return o;
}

void bindEnums(py::module_& m) {
  py::enum_<ringtrain::DataType>(m, "DataType")
      .value("float32", ringtrain::DataType::kFloat32)
      .value("float64", ringtrain::DataType::kFloat64)
      .value("float16", ringtrain::DataType::kFloat16)
      .value("bfloat16", ringtrain::DataType::kBFloat16)
      .value("int32", ringtrain::DataType::kInt32)
      .value("int64", ringtrain::DataType::kInt64)
      .value("uint8", ringtrain::DataType::kUInt8)
      .value("int8", ringtrain::DataType::kInt8)
      .value("int16", ringtrain::DataType::kInt16)
      .value("bool", ringtrain::DataType::kBool);
  py::enum_<ringtrain::ReduceOp>(m, "ReduceOp")
      .value("sum", ringtrain::ReduceOp::kSum)
      .value("average", ringtrain::ReduceOp::kAverage)
      .value("min", ringtrain::ReduceOp::kMin)
      .value("max", ringtrain::ReduceOp::kMax)
      .value("product", ringtrain::ReduceOp::kProduct);
  py::enum_<ringtrain::OperationKind>(m, "OperationKind")
      .value("allreduce", ringtrain::OperationKind::kAllreduce)
      .value("allgather", ringtrain::OperationKind::kAllgather)
      .value("broadcast", ringtrain::OperationKind::kBroadcast)
      .value("alltoall", ringtrain::OperationKind::kAlltoall)
      .value("reducescatter", ringtrain::OperationKind::kReducescatter)
      .value("barrier", ringtrain::OperationKind::kBarrier)
      .value("join", ringtrain::OperationKind::kJoin);
  py::enum_<ringtrain::Backend>(m, "Backend")
      .value("auto", ringtrain::Backend::kAuto)
      .value("mpi", ringtrain::Backend::kMpi)
      .value("ring", ringtrain::Backend::kRing)
      .value("tuned", ringtrain::Backend::kTuned)
      .value("hierarchical", ringtrain::Backend::kHierarchical)
      .value("shm", ringtrain::Backend::kShm);
  py::enum_<ringtrain::Compression>(m, "Compression")
      .value("none", ringtrain::Compression::kNone)
      .value("fp16", ringtrain::Compression::kFloat16)
      .value("bf16", ringtrain::Compression::kBFloat16);
}

void bindCollectives(py::module_& m) {
  const auto released = py::call_guard<py::gil_scoped_release>();
  m.def(
      "allreduce_address",
      [](Address data, std::size_t count, ringtrain::DataType type, ringtrain::ReduceOp op) {
        ringtrain::allreduce(pointer(data), count, type, op);
      },
      released);
  m.def(
      "broadcast_address",
      [](Address data, std::size_t count, ringtrain::DataType type, int root) {
        ringtrain::broadcast(pointer(data), count, type, root);
      },
      released);
  m.def(
      "allgather_address",
      [](Address send, Address recv, std::size_t count, ringtrain::DataType type) {
        ringtrain::allgather(pointer(send), pointer(recv), count, type);
      },
      released);
  m.def("barrier", &ringtrain::barrier, released);
  m.def(
      "start_send",
      [](Address data, std::size_t bytes, int destination, int tag) {
        return ringtrain::startSend(pointer(data), bytes, destination, tag);
      },
      released);
  m.def(
      "start_receive",
      [](Address data, std::size_t bytes, int source, int tag) {
        return ringtrain::startReceive(pointer(data), bytes, source, tag);
      },
      released);
  m.def("wait_transfer", &ringtrain::waitTransfer, released);
}

// A device result's bytes, which it owns, for torch.as_tensor: __cuda_array_interface__ (version
// 3) over them as uint8. Written completely before wait() returned, so no stream is named.
struct DeviceBuffer {
  std::shared_ptr<void> data;
  std::size_t bytes = 0;
};

py::dict cudaArrayInterface(const DeviceBuffer& buffer) {
  py::dict interface;
  interface["shape"] = py::make_tuple(buffer.bytes);
  interface["typestr"] = "|u1";
  interface["data"] = py::make_tuple(reinterpret_cast<Address>(buffer.data.get()), false);
  interface["strides"] = py::none();  // contiguous
  interface["stream"] = py::none();   // nothing for the consumer to wait for
  interface["version"] = 3;
  return interface;
}

// A finished operation's result: (shape, a uint8 NumPy array over its bytes, which owns them,
// received splits, the last rank to join, and a DeviceBuffer for a device result or None).
py::tuple resultTuple(ringtrain::OperationResult result, std::size_t elementBytes) {
  auto* data = new ringtrain::ResultBytes(std::move(result.data));
  py::capsule owner(data, [](void* p) { delete static_cast<ringtrain::ResultBytes*>(p); });
  py::array_t<unsigned char> bytes(static_cast<py::ssize_t>(data->size()), data->data(), owner);
  py::object device = py::none();
  if (result.deviceData) {
    std::size_t count = 1;
    for (std::int64_t d : result.shape)
      count *= static_cast<std::size_t>(d);
    device = py::cast(DeviceBuffer{std::move(result.deviceData), count * elementBytes});
  }
  return py::make_tuple(result.shape, bytes, result.receivedSplits, result.lastJoined, device);
}

void bindNamedOperations(py::module_& m) {
  m.def(
      "submit",
      [](ringtrain::OperationKind kind, const std::string& name, ringtrain::DataType type,
         std::vector<std::int64_t> shape, Address input, Address output, ringtrain::ReduceOp op,
         double prescale, double postscale, int root, std::vector<std::int64_t> splits,
         int processSet, int device, Address readyEvent) {
        ringtrain::Operation o;
        o.kind = kind, o.name = name, o.type = type, o.shape = std::move(shape);
        o.input = pointer(input), o.output = pointer(output), o.op = op;
        o.prescale = prescale, o.postscale = postscale, o.root = root;
        o.splits = std::move(splits), o.processSet = processSet;
        o.device = device, o.readyEvent = readyEvent;
        return ringtrain::submit(o);
      },
      py::arg("kind"), py::arg("name"), py::arg("type"), py::arg("shape"), py::arg("input"),
      py::arg("output"), py::arg("op"), py::arg("prescale"), py::arg("postscale"), py::arg("root"),
      py::arg("splits"), py::arg("process_set"), py::arg("device") = -1,
      py::arg("ready_event") = 0);
  m.def("poll", &ringtrain::poll);
  // element_bytes: the result's element size, which sizes a device result's buffer.
  m.def(
      "wait",
      [](std::int64_t handle, std::size_t elementBytes) {
        ringtrain::OperationResult result;
        {
          const py::gil_scoped_release released;
          result = ringtrain::wait(handle);
        }
        return resultTuple(std::move(result), elementBytes);
      },
      py::arg("handle"), py::arg("element_bytes") = 1);
  py::class_<DeviceBuffer>(m, "DeviceBuffer")
      .def_property_readonly("__cuda_array_interface__", &cudaArrayInterface)
      .def_property_readonly("nbytes", [](const DeviceBuffer& b) { return b.bytes; });
  // NCCL's version code where this build has the GPU path, 0 where it has none.
  m.def("nccl_version", &ringtrain::ncclVersion);
  m.def("add_process_set", &ringtrain::addProcessSet, py::call_guard<py::gil_scoped_release>());
  m.def("remove_process_set", &ringtrain::removeProcessSet,
        py::call_guard<py::gil_scoped_release>());
  m.def("process_set_ranks", &ringtrain::processSetRanks);
  m.def("process_set_ids", &ringtrain::processSetIds);
  m.def("start_timeline", &ringtrain::startTimeline, py::call_guard<py::gil_scoped_release>());
  m.def("stop_timeline", &ringtrain::stopTimeline, py::call_guard<py::gil_scoped_release>());
}

void bindGradientExchange(py::module_& m) {
  py::class_<ringtrain::GradientExchange>(m, "GradientExchange")
      .def(py::init<>())
      .def(py::init<ringtrain::Compression>())
      .def(py::init<ringtrain::Compression, ringtrain::ReduceOp>())
      .def("add_parameter", &ringtrain::GradientExchange::addParameter)
      .def(
          "gradient_ready",
          [](ringtrain::GradientExchange& e, int parameter, Address gradient) {
            e.gradientReady(parameter, static_cast<float*>(pointer(gradient)));
          },
          py::call_guard<py::gil_scoped_release>())
      // A float32 NumPy array over the engine's place for the parameter's gradient; it keeps the
      // exchange alive (the memory itself ends with shutdown()).
      .def("gradient_buffer",
           [](py::object self, int parameter) {
             auto& exchange = self.cast<ringtrain::GradientExchange&>();
             const auto count = static_cast<py::ssize_t>(exchange.parameterSize(parameter));
             float* buffer = nullptr;
             {
               py::gil_scoped_release released;  // the first call is collective
               buffer = exchange.gradientBuffer(parameter);
             }
             return py::array_t<float>(count, buffer, self);
           })
      .def("wait", &ringtrain::GradientExchange::wait, py::call_guard<py::gil_scoped_release>())
      .def("parameter_count", &ringtrain::GradientExchange::parameterCount)
      .def("describe_buckets", &ringtrain::GradientExchange::describeBuckets);
}

}  // namespace

PYBIND11_MODULE(_ringtrain, m) {
  m.doc() = "ringtrain's engine: collectives and the bucketed gradient exchange (docs/api.md)";
  // One translator, so that the derived type is tried before its base.
  static py::exception<ringtrain::Error> error(m, "Error", PyExc_RuntimeError);
  static py::exception<ringtrain::InvalidArgument> invalid(m, "InvalidArgument", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const ringtrain::InvalidArgument& e) {  // CPython's call: pybind11 2.10 to 3 alike
      PyErr_SetString(invalid.ptr(), e.what());
    } catch (const ringtrain::Error& e) {
      PyErr_SetString(error.ptr(), e.what());
    }
  });
  bindEnums(m);
  m.def(
      "start",
      [](std::optional<ringtrain::Backend> backend,
         std::optional<ringtrain::Compression> compression, std::optional<std::size_t> fusion,
         std::optional<bool> overlap, std::optional<std::string> tuningFile,
         std::optional<double> stallTimeout) {
        const ringtrain::Options o =
            options(backend, compression, fusion, overlap, tuningFile, stallTimeout);
        const py::gil_scoped_release released;
        ringtrain::start(o);
      },
      py::arg("backend") = py::none(), py::arg("compression") = py::none(),
      py::arg("fusion_threshold_bytes") = py::none(), py::arg("overlap") = py::none(),
      py::arg("tuning_file") = py::none(), py::arg("stall_timeout_seconds") = py::none());
  m.def("shutdown", &ringtrain::shutdown, py::call_guard<py::gil_scoped_release>());
  m.def("started", &ringtrain::started);
  m.def("rank", &ringtrain::rank);
  m.def("size", &ringtrain::size);
  m.def("local_rank", &ringtrain::localRank);
  m.def("local_size", &ringtrain::localSize);
  bindCollectives(m);
  bindGradientExchange(m);
  bindNamedOperations(m);
}
