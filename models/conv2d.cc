#include "models/conv2d.h"

#include <algorithm>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "models/matrix_products.h"
#if RINGTRAIN_HAVE_ONEDNN
#include "models/direct_convolution.h"
#endif

namespace ringtrain::models {
namespace {

Index outputExtent(Index input, const Conv2dOptions& o) {
  return (input + 2 * o.padding - o.kernel) / o.stride + 1;
}

SampleShape outputShape(const std::string& name, SampleShape input, const Conv2dOptions& o) {
  if (input.channels < 1 || o.outChannels < 1 || o.kernel < 1 || o.stride < 1 || o.padding < 0 ||
      o.chunkBytes < 1)
    throw std::invalid_argument("conv2d layer '" + name +
                                "': channels, kernel, stride and chunk must be positive and "
                                "padding not negative");
  if (input.height + 2 * o.padding < o.kernel || input.width + 2 * o.padding < o.kernel)
    throw std::invalid_argument("conv2d layer '" + name + "': a " + std::to_string(o.kernel) + "x" +
                                std::to_string(o.kernel) + " kernel does not fit a " +
                                toString(input) + " input with padding " +
                                std::to_string(o.padding));
  return {o.outChannels, outputExtent(input.height, o), outputExtent(input.width, o)};
}

struct FieldGeometry {
  Index channels, height, width, kernel, stride, padding, outHeight, outWidth;

  Index sampleSize() const { return channels * height * width; }
  Index rowLength() const { return kernel * channels; }
  // The output columns [first, last) whose kernel column j falls inside the image, for the
  // image column wo·stride − padding + j of output column wo.
  std::pair<Index, Index> insideColumns(Index j) const {
    const auto ceilDiv = [](Index a, Index b) { return a <= 0 ? 0 : (a + b - 1) / b; };
    const Index first = std::min(ceilDiv(padding - j, stride), outWidth);
    return {first, std::clamp(ceilDiv(width + padding - j, stride), first, outWidth)};
  }
};

FieldGeometry fieldGeometry(SampleShape in, SampleShape out, const Conv2dOptions& o) {
  return {in.channels, in.height, in.width, o.kernel, o.stride, o.padding, out.height, out.width};
}

// Field-major columns (Conv2d::columnsAreTapMajor): walks kernel row i of every receptive field in
// the batch, fields in the order of the columns of the im2col matrix (sample, output row, output
// column). For each it calls
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

// Tap-major columns: walks, for every row (i, j, c) of the im2col matrix, the
// output rows of every sample; for each it calls
//   visit(entry, image, w0, first, last)
// where `entry` is where the output row's outWidth values start in the matrix, `image` the
// offset of image row ho·stride − padding + i of channel c in the batch (valid when first <
// last), w0 = j − padding, and [first, last) the output columns whose value lies in the image
// (at column wo·stride + w0); the others, and image rows outside the image, are padding.
template <class Visit>
void forEachTapRun(const FieldGeometry& g, Index batch, Visit&& visit) {
  Index entry = 0;
  for (Index i = 0; i < g.kernel; ++i) {
    for (Index j = 0; j < g.kernel; ++j) {
      const auto [first, last] = g.insideColumns(j);
      for (Index c = 0; c < g.channels; ++c) {
        for (Index b = 0; b < batch; ++b) {
          for (Index ho = 0; ho < g.outHeight; ++ho, entry += g.outWidth) {
            const Index h = ho * g.stride - g.padding + i;
            const bool inside = h >= 0 && h < g.height;
            const Index image = b * g.sampleSize() + (c * g.height + h) * g.width;
            visit(entry, image, j - g.padding, inside ? first : 0, inside ? last : 0);
          }
        }
      }
    }
  }
}

}  // namespace

template <class Scalar>
Conv2d<Scalar>::Conv2d(std::string name, SampleShape input, const Conv2dOptions& options)
    : Layer<Scalar>(name, input, outputShape(name, input, options)), options_(options) {
#if RINGTRAIN_HAVE_ONEDNN
  if (std::is_same_v<Scalar, float> && options.direct) {
    direct_ = std::make_shared<DirectConvolution>(DirectConvolutionShape{
        .inChannels = input.channels,
        .height = input.height,
        .width = input.width,
        .outChannels = options.outChannels,
        .kernel = options.kernel,
        .stride = options.stride,
        .padding = options.padding,
        .inputChannelsFirst = options.inputLayout == ImageLayout::kChannelsFirst});
  }
#endif
}

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
Index Conv2d<Scalar>::chunkSamples(Index batch) const {
  const Index bytesPerSample = fieldSize() * outputPixels() * Index{sizeof(Scalar)};
  return std::clamp<Index>(options_.chunkBytes / bytesPerSample, 1, std::max<Index>(batch, 1));
}

template <class Scalar>
template <class Body>
void Conv2d<Scalar>::forEachChunk(Index batch, Body&& body) const {
  const Index step = chunkSamples(batch);
  for (Index first = 0; first < batch; first += step)
    body(first, std::min(step, batch - first));
}

template <class Scalar>
void Conv2d<Scalar>::reserve(Index batch) {
  if (!isDirect()) columns_.reserve(fieldSize() * chunkSamples(batch) * outputPixels());
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
  if (columnsAreTapMajor()) {
    forEachTapRun(g, batch, [&](Index entry, Index image, Index w0, Index first, Index last) {
      Scalar* dst = cols + entry;
      const Scalar* src = x + image + w0;
      std::fill(dst, dst + first, Scalar(0));
      if (g.stride == 1) {
        std::copy(src + first, src + last, dst + first);  // one block copy, not value by value
      } else {
        for (Index wo = first; wo < last; ++wo)
          dst[wo] = src[wo * g.stride];
      }
      std::fill(dst + last, dst + g.outWidth, Scalar(0));
    });
    return;
  }
  forEachKernelRow(g, batch, [&](Index entry, Index b, Index h, Index w0, Index first, Index last) {
    Scalar* dst = cols + entry;
    const Scalar* src = x + b * g.sampleSize() + (h * g.width + w0 + first) * c;
    std::fill(dst, dst + first * c, Scalar(0));
    std::copy(src, src + (last - first) * c, dst + first * c);
    std::fill(dst + last * c, dst + g.rowLength(), Scalar(0));
  });
}

template <class Scalar>
void Conv2d<Scalar>::col2im(const Scalar* cols, Index batch, Scalar* dx) const {
  const FieldGeometry g = fieldGeometry(this->inputShape(), this->outputShape(), options_);
  const Index c = g.channels;
  std::fill(dx, dx + batch * g.sampleSize(), Scalar(0));
  // Overlapping fields add onto the same input values, hence += and the zeroing above.
  if (columnsAreTapMajor()) {
    forEachTapRun(g, batch, [&](Index entry, Index image, Index w0, Index first, Index last) {
      const Scalar* src = cols + entry;
      Scalar* dst = dx + image + w0;
      for (Index wo = first; wo < last; ++wo)
        dst[wo * g.stride] += src[wo];
    });
    return;
  }
  forEachKernelRow(g, batch, [&](Index entry, Index b, Index h, Index w0, Index first, Index last) {
    Scalar* dst = dx + b * g.sampleSize() + (h * g.width + w0 + first) * c;
    const Scalar* from = cols + entry + first * c;
    const Index n = (last - first) * c;
#pragma omp simd
    for (Index t = 0; t < n; ++t)
      dst[t] += from[t];
  });
}

template <class Scalar>
template <class Body>
void Conv2d<Scalar>::withColumns(Scalar* data, Index fields, Body&& body) const {
  if (columnsAreTapMajor()) {
    body(Eigen::Map<RowMajorMatrix<Scalar>>(data, fieldSize(), fields));
  } else {
    body(BatchView<Scalar>(data, fieldSize(), fields));
  }
}

template <class Scalar>
void Conv2d<Scalar>::forward(ConstBatchView<Scalar> x, BatchView<Scalar> y) {
#if RINGTRAIN_HAVE_ONEDNN
  if constexpr (std::is_same_v<Scalar, float>) {
    if (direct_)
      return direct_->forward(x.data(), weight().data(), bias().data(), y.data(), x.cols());
  }
#endif
  const Index inSize = this->inputShape().size(), outSize = this->outputShape().size();
  Scalar* cols = columns_.reserve(fieldSize() * chunkSamples(x.cols()) * outputPixels());
  forEachChunk(x.cols(), [&](Index first, Index samples) {
    const Index fields = samples * outputPixels();
    im2col(x.data() + first * inSize, samples, cols);
    BatchView<Scalar> outputs(y.data() + first * outSize, options_.outChannels, fields);
    outputs.colwise() = bias();
    withColumns(cols, fields, [&](const auto& columns) {
      product(outputs, weight(), columns, /*accumulate=*/true);
    });
  });
}

template <class Scalar>
void Conv2d<Scalar>::backwardParameters(ConstBatchView<Scalar> x, ConstBatchView<Scalar> dy) {
#if RINGTRAIN_HAVE_ONEDNN
  if constexpr (std::is_same_v<Scalar, float>) {
    if (direct_) {
      return direct_->backwardParameters(x.data(), dy.data(), weightGradient().data(),
                                         biasGradient().data(), x.cols());
    }
  }
#endif
  const Index inSize = this->inputShape().size(), outSize = this->outputShape().size();
  Scalar* cols = columns_.data();
  // The chunks' fields again: they cost less to rebuild from the cached input than to keep for
  // the whole batch and read back from memory.
  forEachChunk(x.cols(), [&](Index first, Index samples) {
    const Index fields = samples * outputPixels();
    im2col(x.data() + first * inSize, samples, cols);
    const ConstBatchView<Scalar> gradOut(dy.data() + first * outSize, options_.outChannels, fields);
    withColumns(cols, fields, [&](const auto& columns) {
      product(weightGradient(), gradOut, columns.transpose(), /*accumulate=*/first > 0);
    });
  });
  const ConstBatchView<Scalar> gradOut(dy.data(), options_.outChannels, x.cols() * outputPixels());
  biasGradient().noalias() = gradOut.rowwise().sum();
}

template <class Scalar>
void Conv2d<Scalar>::backwardInput(ConstBatchView<Scalar> x, ConstBatchView<Scalar> /*y*/,
                                   ConstBatchView<Scalar> dy, BatchView<Scalar> dx) {
#if RINGTRAIN_HAVE_ONEDNN
  if constexpr (std::is_same_v<Scalar, float>) {
    if (direct_) return direct_->backwardInput(dy.data(), weight().data(), dx.data(), x.cols());
  }
#endif
  const Index inSize = this->inputShape().size(), outSize = this->outputShape().size();
  forEachChunk(x.cols(), [&](Index first, Index samples) {
    const Index fields = samples * outputPixels();
    const ConstBatchView<Scalar> gradOut(dy.data() + first * outSize, options_.outChannels, fields);
    withColumns(columns_.data(), fields,
                [&](auto gradCols) { product(gradCols, weight().transpose(), gradOut); });
    col2im(columns_.data(), samples, dx.data() + first * inSize);
  });
}

template class Conv2d<float>;
template class Conv2d<double>;

}  // namespace ringtrain::models
