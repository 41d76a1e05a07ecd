// 2-D convolution as im2col and matrix products, a chunk of the batch at a time.
//
// im2col lays every receptive field of a chunk of samples out as one column of a K×N matrix
// (K = kernel·kernel·C values per field, N = samples·outHeight·outWidth fields). Then, per chunk,
//   forward           Y  = W · cols + b         (O×K · K×N)
//   weight gradient   dW += dY · colsᵀ          (the chunk's fields built again from the input)
//   input gradient    dcols = Wᵀ · dY, scattered back onto the input image (col2im)
// A chunk's columns are kept to what the cache holds (Conv2dOptions::chunkBytes), so that the
// products read them where im2col left them, instead of the whole batch's columns going out to
// memory and back. Y comes out as O×N column-major: for each output pixel its O channels side by
// side, pixels in row order, samples one after another. That is the batch in channels-last (HWC)
// order, with no transpose; so the layer's output is channels-last, whatever its input's layout.
//
// The weight is {O, kernel, kernel, C} row-major ("OHWI", TensorFlow Lite's order), matching
// the (i, j, c) order of a column's rows: for a channels-last input one kernel row of a field,
// kernel·C values, is one contiguous copy.
//
// float32 layers of a build with oneDNN (RINGTRAIN_ONEDNN) run oneDNN's direct convolutions
// instead (models/direct_convolution.h), with the same layouts: faster on every CNN shape measured.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/named_values.h"
#include "models/layer.h"

namespace ringtrain::models {

class DirectConvolution;

// How a GPU model runs its convolutions (models/cuda/gpu_model.h). kFastest: each layer cuDNN can
// run (a GPU build with cuDNN, channels-last input) takes the fastest of im2col + cuBLAS, cuDNN on
// the model's channels-last data and cuDNN on channels-first copies (NCHW, transposed around each
// call), timed whenever the reserved batch grows, so the choice may differ from run to run;
// kIm2col, kCudnn (channels-last) and kCudnnChannelsFirst take one path wherever they can.
enum class ConvolutionPath { kFastest, kIm2col, kCudnn, kCudnnChannelsFirst };
inline constexpr NamedValue<ConvolutionPath> kConvolutionPathNames[] = {
    {ConvolutionPath::kFastest, "fastest"},
    {ConvolutionPath::kIm2col, "im2col"},
    {ConvolutionPath::kCudnn, "cudnn"},
    {ConvolutionPath::kCudnnChannelsFirst, "cudnn-nchw"}};

// Which cuDNN algorithms a GPU convolution may take. kPlain: those summing plain float32 products
// (implicit GEMM, GEMM, direct), deterministic ones first: the same sums every run, close to the
// CPU's. kAny: the fastest cuDNN's Find times, FFT, Winograd and nondeterministic ones (atomic
// sums) included, as PyTorch takes them with cudnn.benchmark (and cudnn.deterministic off, its
// default): the sums may differ from run to run, never between ranks (all step with one average).
enum class ConvolutionAlgorithms { kPlain, kAny };
inline constexpr NamedValue<ConvolutionAlgorithms> kConvolutionAlgorithmNames[] = {
    {ConvolutionAlgorithms::kPlain, "plain"}, {ConvolutionAlgorithms::kAny, "any"}};

struct Conv2dOptions {
  Index outChannels = 1;
  Index kernel = 3;  // square kernels only
  Index stride = 1;
  Index padding = 0;  // zeros on every side
  ImageLayout inputLayout = ImageLayout::kChannelsLast;
  Initialization init = Initialization::kHe;
  // The most bytes of im2col columns per chunk of the batch (at least one sample's): what a
  // core's L2 cache keeps beside the product's packing buffers. Tests make it small.
  Index chunkBytes = 128 * 1024;
  // float32 and built with oneDNN: its direct convolution. false: im2col and products always.
  bool direct = true;
};

// Parameters, in this order: weight {O, kernel, kernel, C} (row-major), bias {O}.
template <class Scalar>
class Conv2d final : public Layer<Scalar> {
 public:
  // Throws std::invalid_argument when the kernel does not fit the padded input.
  Conv2d(std::string name, SampleShape input, const Conv2dOptions& options);

  std::string_view kind() const override { return "conv2d"; }
  std::vector<ParameterShape> parameterShapes() const override;
  void initialize(SplitMix64& generator) override;
  void reserve(Index batch) override;
  void listWorkspaces(HeldMemoryList& held) const override { held.push_back(columns_.held()); }
  double forwardFlopsPerSample() const override;

  void forward(ConstBatchView<Scalar> x, BatchView<Scalar> y) override;
  void backwardParameters(ConstBatchView<Scalar> x, ConstBatchView<Scalar> dy) override;
  void backwardInput(ConstBatchView<Scalar> x, ConstBatchView<Scalar> y, ConstBatchView<Scalar> dy,
                     BatchView<Scalar> dx) override;

  const Conv2dOptions& options() const { return options_; }
  // True when this layer runs oneDNN's direct convolution rather than im2col and products.
  bool isDirect() const { return direct_ != nullptr; }
  // The products' shapes (what a benchmark times): K = kernel·kernel·C values per field, fields
  // per sample, samples per chunk of a batch of `batch` (the columns of one chunk are at most
  // chunkBytes, at least one sample, so that a product reads them from the cache im2col wrote
  // them to).
  Index fieldSize() const;
  Index outputPixels() const;
  Index chunkSamples(Index batch) const;
  // A channels-first input's columns are stored tap-major: the K × N matrix row-major, each row
  // one kernel position (i, j, c) across the fields, so that im2col copies runs of image rows
  // rather than kernel rows of `kernel` values. Otherwise field-major (column-major).
  bool columnsAreTapMajor() const { return options_.inputLayout == ImageLayout::kChannelsFirst; }

  // O × K, K = kernel·kernel·C in (i, j, c) order.
  WeightView<Scalar> weight() { return {this->parameterData(), options_.outChannels, fieldSize()}; }
  VectorView<Scalar> bias() {
    return {this->parameterData() + options_.outChannels * fieldSize(), options_.outChannels};
  }
  WeightView<Scalar> weightGradient() {
    return {this->gradientData(), options_.outChannels, fieldSize()};
  }
  VectorView<Scalar> biasGradient() {
    return {this->gradientData() + options_.outChannels * fieldSize(), options_.outChannels};
  }

 private:
  // body(first, samples) for consecutive chunks of the batch.
  template <class Body>
  void forEachChunk(Index batch, Body&& body) const;
  // body(columns): a chunk's K × fields column matrix at `data`, as an Eigen map in its order.
  template <class Body>
  void withColumns(Scalar* data, Index fields, Body&& body) const;
  void im2col(const Scalar* x, Index batch, Scalar* cols) const;
  void col2im(const Scalar* cols, Index batch, Scalar* dx) const;

  Conv2dOptions options_;
  // K × (chunk samples·outHeight·outWidth): a chunk's fields, or their gradients.
  Workspace<Scalar> columns_;
  // Set when isDirect(). Shared, so that this header needs no complete type.
  std::shared_ptr<DirectConvolution> direct_;
};

extern template class Conv2d<float>;
extern template class Conv2d<double>;

}  // namespace ringtrain::models
