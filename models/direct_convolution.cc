#include "models/direct_convolution.h"

#include <dlfcn.h>

#include <oneapi/dnnl/dnnl.hpp>

namespace ringtrain::models {
namespace {

using Desc = dnnl::memory::desc;
using Tag = dnnl::memory::format_tag;
constexpr auto kFloat = dnnl::memory::data_type::f32;

dnnl::engine& cpuEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// Debian's oneDNN runs its primitives on OpenMP (libgomp), which would start a thread per core
// in every rank. The thread count is the calling thread's own setting, so each thread that runs
// a convolution sets it to one, through the runtime oneDNN loaded.
void keepToOneThread() {
  thread_local bool done = false;
  if (done) return;
  done = true;
  using SetThreads = void (*)(int);
  if (auto* set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"))) set(1);
}

// A memory over the caller's floats (oneDNN takes non-const handles, and reads only inputs).
dnnl::memory over(const Desc& desc, const float* data) {
  return {desc, cpuEngine(), const_cast<float*>(data)};
}

// The weight, or its gradient, in the layout oneDNN chose for a primitive (blocked) beside the
// caller's OHWI one: a buffer in the chosen layout and the reorder between the two, made with the
// primitive. Empty where the layouts agree, and the caller's memory serves as it is.
class WeightLayout {
 public:
  WeightLayout() = default;
  // `toChosen`: the primitive reads the weight (reorder into the buffer); else it writes the
  // gradient (reorder out of it).
  WeightLayout(const Desc& user, const Desc& chosen, bool toChosen) {
    if (user == chosen) return;
    buffer_ = dnnl::memory(chosen, cpuEngine());
    reorder_ = toChosen ? dnnl::reorder({cpuEngine(), user, cpuEngine(), chosen})
                        : dnnl::reorder({cpuEngine(), chosen, cpuEngine(), user});
  }
  // The memory the primitive takes: the buffer, or `user` itself.
  dnnl::memory of(const dnnl::memory& user) const { return buffer_ ? buffer_ : user; }
  // Before a primitive that reads the weight: `user` into the buffer.
  void into(dnnl::memory user, dnnl::stream& stream) {
    if (buffer_) reorder_.execute(stream, user, buffer_);
  }
  // After a primitive that wrote the gradient: the buffer out into `user`.
  void outOf(dnnl::memory user, dnnl::stream& stream) {
    if (buffer_) reorder_.execute(stream, buffer_, user);
  }

 private:
  dnnl::memory buffer_;
  dnnl::reorder reorder_;
};

}  // namespace

struct DirectConvolution::Primitives {
  Index batch = 0;
  Desc input, output, weight, bias;  // the caller's layouts
  dnnl::convolution_forward forward;
  dnnl::convolution_backward_data inputGradient;
  dnnl::convolution_backward_weights parameterGradients;
  WeightLayout forwardWeight, inputGradientWeight, weightGradient;
  dnnl::stream stream{cpuEngine()};
};

DirectConvolution::DirectConvolution(const DirectConvolutionShape& shape) : shape_(shape) {}

DirectConvolution::~DirectConvolution() = default;

DirectConvolution::Primitives& DirectConvolution::primitivesFor(Index batch) {
  if (primitives_ && primitives_->batch == batch) return *primitives_;
  const DirectConvolutionShape& s = shape_;
  const auto extent = [&s](Index in) { return (in + 2 * s.padding - s.kernel) / s.stride + 1; };
  auto p = std::make_unique<Primitives>();
  p->batch = batch;
  // One channel lies the same either way; oneDNN's fastest kernels take it as channels-last.
  const bool channelsFirst = s.inputChannelsFirst && s.inChannels > 1;
  p->input =
      Desc({batch, s.inChannels, s.height, s.width}, kFloat, channelsFirst ? Tag::nchw : Tag::nhwc);
  p->output = Desc({batch, s.outChannels, extent(s.height), extent(s.width)}, kFloat, Tag::nhwc);
  p->weight = Desc({s.outChannels, s.inChannels, s.kernel, s.kernel}, kFloat, Tag::ohwi);
  p->bias = Desc({s.outChannels}, kFloat, Tag::a);
  const Desc anyWeight({s.outChannels, s.inChannels, s.kernel, s.kernel}, kFloat, Tag::any);
  const dnnl::memory::dims strides{s.stride, s.stride}, padding{s.padding, s.padding};
  constexpr auto kDirect = dnnl::algorithm::convolution_direct;
  const dnnl::convolution_forward::primitive_desc forward(
      {dnnl::prop_kind::forward_training, kDirect, p->input, anyWeight, p->bias, p->output, strides,
       padding, padding},
      cpuEngine());
  const dnnl::convolution_backward_data::primitive_desc inputGradient(
      {kDirect, p->input, anyWeight, p->output, strides, padding, padding}, cpuEngine(), forward);
  const dnnl::convolution_backward_weights::primitive_desc parameterGradients(
      {kDirect, p->input, anyWeight, p->bias, p->output, strides, padding, padding}, cpuEngine(),
      forward);
  p->forward = dnnl::convolution_forward(forward);
  p->inputGradient = dnnl::convolution_backward_data(inputGradient);
  p->parameterGradients = dnnl::convolution_backward_weights(parameterGradients);
  p->forwardWeight = WeightLayout(p->weight, forward.weights_desc(), /*toChosen=*/true);
  p->inputGradientWeight = WeightLayout(p->weight, inputGradient.weights_desc(), true);
  p->weightGradient = WeightLayout(p->weight, parameterGradients.diff_weights_desc(), false);
  primitives_ = std::move(p);
  return *primitives_;
}

void DirectConvolution::forward(const float* x, const float* weight, const float* bias, float* y,
                                Index batch) {
  keepToOneThread();
  Primitives& p = primitivesFor(batch);
  const dnnl::memory user = over(p.weight, weight);
  p.forwardWeight.into(user, p.stream);
  p.forward.execute(p.stream, {{DNNL_ARG_SRC, over(p.input, x)},
                               {DNNL_ARG_WEIGHTS, p.forwardWeight.of(user)},
                               {DNNL_ARG_BIAS, over(p.bias, bias)},
                               {DNNL_ARG_DST, over(p.output, y)}});
  p.stream.wait();
}

void DirectConvolution::backwardParameters(const float* x, const float* dy, float* dWeight,
                                           float* dBias, Index batch) {
  keepToOneThread();
  Primitives& p = primitivesFor(batch);
  const dnnl::memory user = over(p.weight, dWeight);
  p.parameterGradients.execute(p.stream, {{DNNL_ARG_SRC, over(p.input, x)},
                                          {DNNL_ARG_DIFF_DST, over(p.output, dy)},
                                          {DNNL_ARG_DIFF_WEIGHTS, p.weightGradient.of(user)},
                                          {DNNL_ARG_DIFF_BIAS, over(p.bias, dBias)}});
  p.weightGradient.outOf(user, p.stream);
  p.stream.wait();
}

void DirectConvolution::backwardInput(const float* dy, const float* weight, float* dx,
                                      Index batch) {
  keepToOneThread();
  Primitives& p = primitivesFor(batch);
  const dnnl::memory user = over(p.weight, weight);
  p.inputGradientWeight.into(user, p.stream);
  p.inputGradient.execute(p.stream, {{DNNL_ARG_DIFF_DST, over(p.output, dy)},
                                     {DNNL_ARG_WEIGHTS, p.inputGradientWeight.of(user)},
                                     {DNNL_ARG_DIFF_SRC, over(p.input, dx)}});
  p.stream.wait();
}

}  // namespace ringtrain::models
