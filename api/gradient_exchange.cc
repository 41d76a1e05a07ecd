// ringtrain::GradientExchange: the caller's parameters as the engine's gradient segments.
//
// The engine averages one flat float32 buffer, cut into segments in forward order and into
// buckets from its end (bucket_plan.h). Parameters are registered in backward's order, so
// parameter i is segment n-1-i and the buffer holds them last-registered first. gradientReady
// copies the caller's gradient into the buffer; the engine is told only of the longest run of
// parameters ready from the first one on, so it sees the same announcements in the same order on
// every rank whatever order the caller's hooks fire in (the shared-memory exchange also needs
// them from the buffer's end backwards). wait() copies each bucket's average back.
#include <algorithm>
#include <cstring>

#include <mpi.h>

#include "api/runtime.h"
#include "collectives/mpi_check.h"

namespace ringtrain {

struct GradientExchange::Impl final : api::Closable {
  struct Parameter {
    std::string name;
    std::size_t count = 0;
    std::size_t offset = 0;    // in the flat buffer, set when the exchange is built
    float* average = nullptr;  // where this step's average goes
    bool ready = false;
  };

  api::Runtime* runtime = nullptr;
  engine::ExchangeOptions options;    // start()'s, with this exchange's compression
  std::vector<Parameter> parameters;  // registration (backward) order
  std::unique_ptr<engine::GradientExchange> exchange;
  std::vector<float> storage;  // the flat gradients, where the exchange leaves them to us
  engine::StepBuffers buffers;
  std::size_t announced = 0;  // parameters [0, announced) told to the engine this step
  bool stepOpen = false;

  ~Impl() override { close(); }
  void close() override;
  int segmentOf(std::size_t parameter) const {
    return static_cast<int>(parameters.size() - 1 - parameter);
  }
  // `parameter` as an index of `parameters`, or Error naming `call`.
  std::size_t indexOf(int parameter, const char* call) const;
  void checkAgreement() const;
  void build();
  void beginStepIfNeeded();
  void announceReadyRun();
  void copyAverage(const engine::GradientBucket& part);
};

namespace {

// Every rank's lines, in rank order: one all-gather of lengths, one of the text.
std::vector<std::string> allgatherText(const std::string& mine, MPI_Comm comm) {
  int size = 0;
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(comm, &size));
  int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<std::size_t>(size)), offsets(lengths.size(), 0);
  RINGTRAIN_MPI_CHECK(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm));
  for (std::size_t r = 1; r < lengths.size(); ++r)
    offsets[r] = offsets[r - 1] + lengths[r - 1];
  std::string all(static_cast<std::size_t>(offsets.back() + lengths.back()), '\0');
  RINGTRAIN_MPI_CHECK(MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(),
                                     offsets.data(), MPI_CHAR, comm));
  std::vector<std::string> texts;
  for (std::size_t r = 0; r < lengths.size(); ++r)
    texts.push_back(
        all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(lengths[r])));
  return texts;
}

std::string describeParameter(std::size_t index, const std::string& name, std::size_t count) {
  return "parameter " + std::to_string(index) + " '" + name + "' of " + std::to_string(count) +
         " float32";
}

std::vector<std::string> linesOf(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1)
    lines.push_back(text.substr(start, end - start));
  return lines;
}

// "rank 1 registers parameter 2 'b' of 10 float32 where rank 0 registers parameter 2 'b' of 12
// float32": the first difference between rank 0's list and the first rank whose list differs.
std::string disagreement(const std::vector<std::string>& texts) {
  for (std::size_t r = 1; r < texts.size(); ++r) {
    if (texts[r] == texts[0]) continue;
    const std::vector<std::string> theirs = linesOf(texts[r]), ours = linesOf(texts[0]);
    const std::string who = "rank " + std::to_string(r);
    for (std::size_t i = 0; i < std::max(theirs.size(), ours.size()); ++i) {
      if (i >= ours.size()) return who + " registers an extra " + theirs[i] + " that rank 0 lacks";
      if (i >= theirs.size()) return who + " lacks " + ours[i] + " that rank 0 registers";
      if (theirs[i] != ours[i])
        return who + " registers " + theirs[i] + " where rank 0 registers " + ours[i];
    }
  }
  return "";
}

}  // namespace

void GradientExchange::Impl::checkAgreement() const {
  std::string mine;
  for (std::size_t i = 0; i < parameters.size(); ++i)
    mine += describeParameter(i, parameters[i].name, parameters[i].count) + "\n";
  const std::string problem = disagreement(allgatherText(mine, runtime->environment->world()));
  if (!problem.empty()) throw Error("ringtrain::GradientExchange: ranks disagree: " + problem);
}

void GradientExchange::Impl::build() {
  if (parameters.empty()) throw Error("ringtrain::GradientExchange: no parameter registered");
  checkAgreement();
  std::vector<engine::GradientSegment> segments(parameters.size());
  std::size_t offset = 0;
  for (int s = 0; s < static_cast<int>(segments.size()); ++s) {
    Parameter& p = parameters[parameters.size() - 1 - static_cast<std::size_t>(s)];
    p.offset = offset;
    segments[static_cast<std::size_t>(s)] = {p.name, offset, p.count};
    offset += p.count;
  }
  exchange = api::translated([&] {
    return engine::makeGradientExchange(api::exchangeBackend(*runtime, options.compression),
                                        runtime->environment->world(), std::move(segments),
                                        options);
  });
  storage.assign(offset, 0.0f);
  buffers = exchange->hostBuffers(storage);
  if (runtime->watchdog && exchange->communicator())
    runtime->watchdog->watch(*exchange->communicator(), "gradient");
}

void GradientExchange::Impl::close() {
  if (!runtime) return;
  if (runtime->watchdog && exchange && exchange->communicator())
    runtime->watchdog->unwatch(*exchange->communicator());
  exchange.reset();  // joins the communication thread
  std::erase(runtime->open, static_cast<api::Closable*>(this));
  runtime = nullptr;
}

void GradientExchange::Impl::beginStepIfNeeded() {
  if (!exchange) build();
  if (stepOpen) return;
  for (Parameter& p : parameters) {
    p.ready = false;
    p.average = nullptr;
  }
  announced = 0;
  exchange->beginStep(buffers);
  stepOpen = true;
}

void GradientExchange::Impl::announceReadyRun() {
  while (announced < parameters.size() && parameters[announced].ready) {
    exchange->segmentReady(segmentOf(announced));
    ++announced;
  }
}

void GradientExchange::Impl::copyAverage(const engine::GradientBucket& part) {
  for (int s = part.firstSegment; s <= part.lastSegment; ++s) {
    const Parameter& p = parameters[parameters.size() - 1 - static_cast<std::size_t>(s)];
    const std::size_t begin = std::max(p.offset, part.offset);
    const std::size_t end = std::min(p.offset + p.count, part.offset + part.count);
    if (p.average == nullptr || begin >= end) continue;
    std::memcpy(p.average + (begin - p.offset), buffers.averaged.data() + begin,
                (end - begin) * sizeof(float));
  }
}

GradientExchange::GradientExchange() : impl_(std::make_unique<Impl>()) {
  api::Runtime& runtime = api::startedRuntime("GradientExchange");
  impl_->runtime = &runtime;
  impl_->options = runtime.exchangeOptions;
  runtime.open.push_back(impl_.get());
}

GradientExchange::GradientExchange(Compression compression) : GradientExchange() {
  impl_->options.compression = api::engineCompression(compression);
}

GradientExchange::GradientExchange(Compression compression, ReduceOp op)
    : GradientExchange(compression) {
  if (op != ReduceOp::kAverage && op != ReduceOp::kSum) {
    throw Error("ringtrain::GradientExchange: the reduction must be kAverage or kSum");
  }
  impl_->options.reduction =
      op == ReduceOp::kSum ? engine::Reduction::kSum : engine::Reduction::kAverage;
}

GradientExchange::~GradientExchange() = default;

int GradientExchange::addParameter(const std::string& name, std::size_t count) {
  if (!impl_->runtime) throw Error("ringtrain::GradientExchange::addParameter after shutdown()");
  if (impl_->exchange) {
    throw Error("ringtrain::GradientExchange::addParameter '" + name +
                "': the parameters are fixed once the first gradient is announced");
  }
  if (count == 0) throw Error("ringtrain::GradientExchange::addParameter '" + name + "': empty");
  impl_->parameters.push_back({name, count});
  return static_cast<int>(impl_->parameters.size() - 1);
}

std::size_t GradientExchange::Impl::indexOf(int parameter, const char* call) const {
  if (!runtime) {
    throw Error(std::string("ringtrain::GradientExchange::") + call + " after shutdown()");
  }
  if (parameter < 0 || static_cast<std::size_t>(parameter) >= parameters.size()) {
    throw Error(std::string("ringtrain::GradientExchange::") + call + ": no parameter " +
                std::to_string(parameter) + " (" + std::to_string(parameters.size()) +
                " registered)");
  }
  return static_cast<std::size_t>(parameter);
}

float* GradientExchange::gradientBuffer(int parameter) {
  Impl& impl = *impl_;
  const std::size_t i = impl.indexOf(parameter, "gradientBuffer");
  if (!impl.exchange) impl.build();
  return impl.buffers.gradients.data() + impl.parameters[i].offset;
}

std::size_t GradientExchange::parameterSize(int parameter) const {
  return impl_->parameters[impl_->indexOf(parameter, "parameterSize")].count;
}

void GradientExchange::gradientReady(int parameter, float* gradient) {
  Impl& impl = *impl_;
  Impl::Parameter& p = impl.parameters[impl.indexOf(parameter, "gradientReady")];
  impl.beginStepIfNeeded();
  if (p.ready) {
    throw Error("ringtrain::GradientExchange::gradientReady: parameter '" + p.name +
                "' announced twice in one step (call wait() between steps)");
  }
  float* slot = impl.buffers.gradients.data() + p.offset;
  if (gradient != slot) std::memcpy(slot, gradient, p.count * sizeof(float));
  p.average = gradient;
  p.ready = true;
  impl.announceReadyRun();
}

void GradientExchange::wait() {
  Impl& impl = *impl_;
  if (!impl.runtime) throw Error("ringtrain::GradientExchange::wait after shutdown()");
  impl.beginStepIfNeeded();
  for (Impl::Parameter& p : impl.parameters) {
    if (p.ready) continue;
    std::fill_n(impl.buffers.gradients.data() + p.offset, p.count, 0.0f);
    p.ready = true;
  }
  impl.announceReadyRun();
  impl.stepOpen = false;
  api::translated([&] {
    impl.exchange->finishStep([&](const engine::GradientBucket& part) { impl.copyAverage(part); });
  });
}

int GradientExchange::parameterCount() const {
  return static_cast<int>(impl_->parameters.size());
}

std::string GradientExchange::describeBuckets() const {
  return impl_->exchange ? impl_->exchange->describePlan() : "";
}

}  // namespace ringtrain
