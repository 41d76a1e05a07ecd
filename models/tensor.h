// The tensors of models/: per-sample shapes, and batches as column-major matrices.
//
// A batch of B samples of D = C·H·W values each is stored sample after sample, contiguously
// (the contract with data/): that is exactly a column-major D×B matrix, one column per sample.
// Every layer maps its input and output that way, so a dense layer is one matrix product over
// the whole batch and no layer copies a batch into another shape.
#pragma once

#include <Eigen/Core>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ringtrain::models {

using Index = Eigen::Index;

// How the C×H×W values of one sample are ordered. The model's input is channels-first (CHW:
// what data/ delivers and what MNIST is); everything after a convolution is channels-last
// (HWC): one matrix product over the whole batch yields that order for free (see conv2d.h), and
// it puts a pixel's channels side by side, which is what im2col and pooling read contiguously.
// For one channel the two orders are the same.
enum class ImageLayout { kChannelsFirst, kChannelsLast };

// The shape of one sample. Dense activations are {features, 1, 1}.
struct SampleShape {
  Index channels = 1;
  Index height = 1;
  Index width = 1;

  Index size() const { return channels * height * width; }
  friend bool operator==(const SampleShape&, const SampleShape&) = default;
};

// "1x28x28".
std::string toString(const SampleShape& shape);

template <class Scalar>
using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
template <class Scalar>
using RowMajorMatrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class Scalar>
using Vector = Eigen::Matrix<Scalar, Eigen::Dynamic, 1>;

// A batch (features × samples) or any other contiguous column-major block: views, never owners.
template <class Scalar>
using BatchView = Eigen::Map<Matrix<Scalar>>;
template <class Scalar>
using ConstBatchView = Eigen::Map<const Matrix<Scalar>>;

template <class Scalar>
ConstBatchView<Scalar> asConst(const BatchView<Scalar>& view) {
  return {view.data(), view.rows(), view.cols()};
}

// Weights are row-major, so that a parameter's shape in the parameter table ({out, in} for a
// dense layer) reads in C order, last index fastest, like NumPy's and PyTorch's.
template <class Scalar>
using WeightView = Eigen::Map<RowMajorMatrix<Scalar>>;
template <class Scalar>
using ConstWeightView = Eigen::Map<const RowMajorMatrix<Scalar>>;
template <class Scalar>
using VectorView = Eigen::Map<Vector<Scalar>>;

// A block of memory a layer keeps from step to step (what forward keeps for backward, scratch),
// for the memory report: its address, so that a block several layers share is counted once.
struct HeldMemory {
  const void* data = nullptr;
  std::size_t bytes = 0;
};
using HeldMemoryList = std::vector<HeldMemory>;

// Scratch memory that only grows: layers keep one per workspace, sized for the largest batch seen,
// so that a training step allocates nothing once the first step of that size has run.
template <class Scalar>
class Workspace {
 public:
  // At least `count` elements; the contents are kept only while no growth happens.
  Scalar* reserve(Index count) {
    if (count > storage_.size()) storage_.resize(count);
    return storage_.data();
  }
  Scalar* data() { return storage_.data(); }
  const Scalar* data() const { return storage_.data(); }
  Index capacity() const { return storage_.size(); }
  HeldMemory held() const {
    return {storage_.data(), static_cast<std::size_t>(storage_.size()) * sizeof(Scalar)};
  }

 private:
  Vector<Scalar> storage_;  // Eigen's allocator: aligned for the widest vector unit
};

}  // namespace ringtrain::models
