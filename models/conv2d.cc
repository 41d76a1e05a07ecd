#include "models/conv2d.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "models/matrix_products.h"

namespace ringtrain::models {
namespace {

Index outputExtent(Index input, const Conv2dOptions& o) {
  return (input + 2 * o.padding - o.kernel) / o.stride + 1;
}

SampleShape outputShape(const std::string& name, SampleShape input, const Conv2dOptions& o) {
  if (input.channels < 1 || o.outChannels < 1 || o.kernel < 1 || o.stride < 1 || o.padding < 0)
    throw std::invalid_argument("conv2d layer '" + name +
                                "': channels, kernel and stride must be positive and padding "
                                "not negative");
  if (input.height + 2 * o.padding < o.kernel || input.width + 2 * o.padding < o.kernel)
    throw std::invalid_argument("conv2d layer '" + name + "': a " + std::to_string(o.kernel) + "x" +
                                std::to_string(o.kernel) + " kernel does not fit a " +
                                toString(input) + " input with padding " +
                                std::to_string(o.padding));
  return {o.outChannels, outputExtent(input.height, o), outputExtent(input.width, o)};
}

struct FieldGeometry {
  Index channels, height, width, kernel, stride, padding, outHeight, outWidth;
  // A kernel row's in-image part is one contiguous run of the image when channels are last (or
  // there is only one channel); channels-first images with several channels (only ever a
  // model's first layer) are read value by value.
  bool rowsAreContiguous;

  Index sampleSize() const { return channels * height * width; }
  Index rowLength() const { return kernel * channels; }
  // Where value (c, h, w) of a sample lies when rows are not contiguous (channels first).
  Index channelsFirstOffset(Index c, Index h, Index w) const {
    return (c * height + h) * width + w;
  }
};

FieldGeometry fieldGeometry(SampleShape in, SampleShape out, const Conv2dOptions& o) {
  return {in.channels, in.height, in.width,
          o.kernel,    o.stride,  o.padding,
          out.height,  out.width, o.inputLayout == ImageLayout::kChannelsLast || in.channels == 1};
}

// Walks kernel row i of every receptive field in the batch, fields in the order of the columns
// of the im2col matrix (sample, output row, output column). For each it calls
//   visit(entry, sample, h, w0, first, last)
// where `entry` is where the row's kernel·C values start in the im2col matrix, h the image row
// (valid only when first < last), w0 the image column of the field's kernel column 0 (negative
// inside the left padding), and [first, last) the kernel columns that fall inside the image;
// the others, and rows outside the image (first == last == 0), are padding.
template <class Visit>
void forEachKernelRow(const FieldGeometry& g, Index batch, Visit&& visit) {
  const Index rowLength = g.rowLength();
  const Index fieldSize = g.kernel * rowLength;
  Index entry = 0;
  for (Index b = 0; b < batch; ++b) {
    for (Index ho = 0; ho < g.outHeight; ++ho) {
      const Index h0 = ho * g.stride - g.padding;
      for (Index wo = 0; wo < g.outWidth; ++wo, entry += fieldSize) {
        const Index w0 = wo * g.stride - g.padding;
        const Index first = std::clamp<Index>(-w0, 0, g.kernel);
        const Index last = std::clamp<Index>(g.width - w0, first, g.kernel);
        for (Index i = 0; i < g.kernel; ++i) {
          const Index h = h0 + i;
          const bool inside = h >= 0 && h < g.height;
          visit(entry + i * rowLength, b, h, w0, inside ? first : 0, inside ? last : 0);
        }
      }
    }
  }
}

}  // namespace

template <class Scalar>
Conv2d<Scalar>::Conv2d(std::string name, SampleShape input, const Conv2dOptions& options)
    : Layer<Scalar>(name, input, outputShape(name, input, options)), options_(options) {}

template <class Scalar>
Index Conv2d<Scalar>::fieldSize() const {
  return options_.kernel * options_.kernel * this->inputShape().channels;
}

template <class Scalar>
Index Conv2d<Scalar>::outputPixels() const {
  return this->outputShape().height * this->outputShape().width;
}

template <class Scalar>
std::vector<ParameterShape> Conv2d<Scalar>::parameterShapes() const {
  const Index k = options_.kernel;
  return {{"weight", {options_.outChannels, k, k, this->inputShape().channels}},
          {"bias", {options_.outChannels}}};
}

template <class Scalar>
void Conv2d<Scalar>::initialize(SplitMix64& generator) {
  // Fan-in and fan-out as PyTorch counts them: every weight a field sees or feeds.
  const Index window = options_.kernel * options_.kernel;
  this->initializeWeightsAndZeroBiases(
      options_.outChannels * fieldSize(),
      initializationBound(options_.init, fieldSize(), options_.outChannels * window), generator);
}

template <class Scalar>
void Conv2d<Scalar>::reserve(Index batch) {
  columns_.reserve(fieldSize() * batch * outputPixels());
}

template <class Scalar>
double Conv2d<Scalar>::forwardFlopsPerSample() const {
  return 2.0 * static_cast<double>(options_.outChannels) * static_cast<double>(fieldSize()) *
         static_cast<double>(outputPixels());
}

template <class Scalar>
void Conv2d<Scalar>::im2col(const Scalar* x, Index batch, Scalar* cols) const {
  const FieldGeometry g = fieldGeometry(this->inputShape(), this->outputShape(), options_);
  const Index c = g.channels;
  forEachKernelRow(g, batch, [&](Index entry, Index b, Index h, Index w0, Index first, Index last) {
    Scalar* dst = cols + entry;
    const Scalar* sample = x + b * g.sampleSize();
    std::fill(dst, dst + first * c, Scalar(0));
    if (g.rowsAreContiguous) {
      const Scalar* src = sample + (h * g.width + w0 + first) * c;
      std::copy(src, src + (last - first) * c, dst + first * c);
    } else {
      for (Index j = first; j < last; ++j)
        for (Index k = 0; k < c; ++k)
          dst[j * c + k] = sample[g.channelsFirstOffset(k, h, w0 + j)];
    }
    std::fill(dst + last * c, dst + g.rowLength(), Scalar(0));
  });
}

template <class Scalar>
void Conv2d<Scalar>::col2im(const Scalar* cols, Index batch, Scalar* dx) const {
  const FieldGeometry g = fieldGeometry(this->inputShape(), this->outputShape(), options_);
  const Index c = g.channels;
  std::fill(dx, dx + batch * g.sampleSize(), Scalar(0));
  // Overlapping fields add onto the same input values, hence += and the zeroing above.
  forEachKernelRow(g, batch, [&](Index entry, Index b, Index h, Index w0, Index first, Index last) {
    const Scalar* src = cols + entry;
    Scalar* sample = dx + b * g.sampleSize();
    if (g.rowsAreContiguous) {
      Scalar* dst = sample + (h * g.width + w0 + first) * c;
      const Scalar* from = src + first * c;
      const Index n = (last - first) * c;
#pragma omp simd
      for (Index t = 0; t < n; ++t)
        dst[t] += from[t];
    } else {
      for (Index j = first; j < last; ++j)
        for (Index k = 0; k < c; ++k)
          sample[g.channelsFirstOffset(k, h, w0 + j)] += src[j * c + k];
    }
  });
}

template <class Scalar>
void Conv2d<Scalar>::forward(ConstBatchView<Scalar> x, BatchView<Scalar> y) {
  const Index fields = x.cols() * outputPixels();
  Scalar* cols = columns_.reserve(fieldSize() * fields);
  im2col(x.data(), x.cols(), cols);
  BatchView<Scalar> outputs(y.data(), options_.outChannels, fields);
  outputs.colwise() = bias();
  product(outputs, weight(), ConstBatchView<Scalar>(cols, fieldSize(), fields),
          /*accumulate=*/true);
}

template <class Scalar>
void Conv2d<Scalar>::backwardParameters(ConstBatchView<Scalar> x, ConstBatchView<Scalar> dy) {
  const Index fields = x.cols() * outputPixels();
  const ConstBatchView<Scalar> gradOut(dy.data(), options_.outChannels, fields);
  const ConstBatchView<Scalar> cols(columns_.data(), fieldSize(), fields);
  product(weightGradient(), gradOut, cols.transpose());
  biasGradient().noalias() = gradOut.rowwise().sum();
}

template <class Scalar>
void Conv2d<Scalar>::backwardInput(ConstBatchView<Scalar> x, ConstBatchView<Scalar> /*y*/,
                                   ConstBatchView<Scalar> dy, BatchView<Scalar> dx) {
  const Index fields = x.cols() * outputPixels();
  const ConstBatchView<Scalar> gradOut(dy.data(), options_.outChannels, fields);
  // The fields are no longer needed once the weight gradient exists: their gradients reuse the
  // buffer, which at K×N is the largest this layer has.
  BatchView<Scalar> gradCols(columns_.data(), fieldSize(), fields);
  product(gradCols, weight().transpose(), gradOut);
  col2im(gradCols.data(), x.cols(), dx.data());
}

template class Conv2d<float>;
template class Conv2d<double>;

}  // namespace ringtrain::models
