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

// `user` in the layout `wanted`: itself where they agree, else reordered into `scratch`.
dnnl::memory inLayout(const Desc& wanted, dnnl::memory user, dnnl::memory& scratch,
                      dnnl::stream& stream) {
  if (user.get_desc() == wanted) return user;
  if (!scratch || scratch.get_desc() != wanted) scratch = dnnl::memory(wanted, cpuEngine());
  dnnl::reorder(user, scratch).execute(stream, user, scratch);
  return scratch;
}

}  // namespace

struct DirectConvolution::Primitives {
  Index batch = 0;
  Desc input, output, weight, bias;  // the caller's layouts
  dnnl::convolution_forward::primitive_desc forwardDesc;
  dnnl::convolution_backward_data::primitive_desc inputDesc;
  dnnl::convolution_backward_weights::primitive_desc parametersDesc;
  dnnl::convolution_forward forward;
  dnnl::convolution_backward_data backwardInput;
  dnnl::convolution_backward_weights backwardParameters;
  // The weight and its gradient in the layouts oneDNN chose for them (blocked), where it differs.
  dnnl::memory forwardWeight, inputWeight, weightGradient;
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
  p->forwardDesc = {{dnnl::prop_kind::forward_training, kDirect, p->input, anyWeight, p->bias,
                     p->output, strides, padding, padding},
                    cpuEngine()};
  p->inputDesc = {{kDirect, p->input, anyWeight, p->output, strides, padding, padding},
                  cpuEngine(),
                  p->forwardDesc};
  p->parametersDesc = {
      {kDirect, p->input, anyWeight, p->bias, p->output, strides, padding, padding},
      cpuEngine(),
      p->forwardDesc};
  p->forward = dnnl::convolution_forward(p->forwardDesc);
  p->backwardInput = dnnl::convolution_backward_data(p->inputDesc);
  p->backwardParameters = dnnl::convolution_backward_weights(p->parametersDesc);
  primitives_ = std::move(p);
  return *primitives_;
}

void DirectConvolution::forward(const float* x, const float* weight, const float* bias, float* y,
                                Index batch) {
  keepToOneThread();
  Primitives& p = primitivesFor(batch);
  const dnnl::memory w =
      inLayout(p.forwardDesc.weights_desc(), over(p.weight, weight), p.forwardWeight, p.stream);
  p.forward.execute(p.stream, {{DNNL_ARG_SRC, over(p.input, x)},
                               {DNNL_ARG_WEIGHTS, w},
                               {DNNL_ARG_BIAS, over(p.bias, bias)},
                               {DNNL_ARG_DST, over(p.output, y)}});
  p.stream.wait();
}

void DirectConvolution::backwardParameters(const float* x, const float* dy, float* dWeight,
                                           float* dBias, Index batch) {
  keepToOneThread();
  Primitives& p = primitivesFor(batch);
  dnnl::memory user = over(p.weight, dWeight);
  const Desc& chosen = p.parametersDesc.diff_weights_desc();
  if (chosen != p.weight && (!p.weightGradient || p.weightGradient.get_desc() != chosen))
    p.weightGradient = dnnl::memory(chosen, cpuEngine());
  dnnl::memory gradient = chosen == p.weight ? user : p.weightGradient;
  p.backwardParameters.execute(p.stream, {{DNNL_ARG_SRC, over(p.input, x)},
                                          {DNNL_ARG_DIFF_DST, over(p.output, dy)},
                                          {DNNL_ARG_DIFF_WEIGHTS, gradient},
                                          {DNNL_ARG_DIFF_BIAS, over(p.bias, dBias)}});
  if (chosen != p.weight) dnnl::reorder(gradient, user).execute(p.stream, gradient, user);
  p.stream.wait();
}

void DirectConvolution::backwardInput(const float* dy, const float* weight, float* dx,
                                      Index batch) {
  keepToOneThread();
  Primitives& p = primitivesFor(batch);
  const dnnl::memory w =
      inLayout(p.inputDesc.weights_desc(), over(p.weight, weight), p.inputWeight, p.stream);
  p.backwardInput.execute(p.stream, {{DNNL_ARG_DIFF_DST, over(p.output, dy)},
                                     {DNNL_ARG_WEIGHTS, w},
                                     {DNNL_ARG_DIFF_SRC, over(p.input, dx)}});
  p.stream.wait();
}

}  // namespace ringtrain::models
