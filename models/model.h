// Model: a sequence of layers and a loss, with every parameter in one flat buffer and every
// gradient in another.
//
// The flat buffers are what the rest of ringtrain works on: rank 0's initial weights are
// broadcast as one buffer, a fusion bucket is a contiguous range of the gradients (no copy into a
// separate fusion buffer), the optimiser is one loop, and a checkpoint is the buffer plus the
// parameter table. Layers lie in the buffers in forward order, each layer's parameters in one
// contiguous slice, with no padding between them.
//
// A training step is forward(batch), then backward(onGradientsReady). Backward walks the layers
// from the last to the first and calls onGradientsReady for each layer that has parameters as
// soon as that layer's gradients are final, before it computes the gradient for the layer below,
// so the caller can start reducing those gradients while backward goes on. Gradients are
// overwritten, not accumulated, and are those of the batch's mean loss.
//
// A model allocates when it first sees a batch larger than any before (reserve() does it up
// front); after that a step allocates nothing of its own. One model is used by one thread at a
// time; the Eigen products run on that thread alone.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/layer.h"
#include "models/loss.h"
#include "models/tensor.h"

namespace ringtrain::models {

// One parameter tensor: where it lies in parameters() (and, at the same place, gradients()).
struct ParameterEntry {
  int layerIndex = 0;        // index of its layer in the model (ReLUs and pools count too)
  std::string name;          // "<layer>.<parameter>", e.g. "fc1.weight"
  std::vector<Index> shape;  // C order, e.g. {512, 784} for a dense weight
  std::size_t offset = 0;    // in elements
  std::size_t count = 0;     // product of the shape
};

// All the parameters of one layer: a contiguous range of the flat buffers.
struct LayerParameters {
  int layerIndex = 0;
  std::string name;  // the layer's name, e.g. "fc1"
  std::size_t offset = 0;
  std::size_t count = 0;
};

// Called during backward with a layer whose gradients are final; layers come in reverse order.
using GradientReadyCallback = std::function<void(const LayerParameters&)>;

// Told when a layer starts and ends its work in a training step (for a timeline). Backward work
// of a layer spans its parameter gradients (and their GradientReadyCallback) and its input
// gradient. Evaluation is not observed.
enum class LayerPhase { kForward, kBackward };
using LayerObserver = std::function<void(int layerIndex, LayerPhase phase, bool begins)>;

// A batch as data/ delivers it: B samples of inputShape().size() values each, sample after
// sample, and their targets (labels for classification models, values for regression). A
// classification model has labelsPerSample() labels per sample: one per output position (a
// language model's T next tokens), one for an image classifier.
template <class Scalar>
struct Batch {
  std::span<const Scalar> inputs;
  std::span<const std::int32_t> labels;
  std::span<const Scalar> values;
};

// What a model needs of a batch's sizes. countSamples() returns the batch's sample count, or
// throws std::invalid_argument naming `model` when the sizes do not fit: what Model::forward
// and evaluate (and the GPU mirror's) throw.
struct BatchRequirements {
  std::string model;
  SampleShape input;
  Index outputs = 0;
  bool labels = true;  // class labels (else one target value per output)
  Index labelsPerSample = 1;

  template <class Scalar>
  Index countSamples(const Batch<Scalar>& batch) const {
    return countSamples(batch.inputs.size(), batch.labels.size(), batch.values.size());
  }
  Index countSamples(std::size_t inputs, std::size_t labelCount, std::size_t values) const;
};

// Sums over the samples of a batch (add them up across batches and ranks, then divide).
// A sample's loss is the mean over its positions; correct counts positions.
struct BatchResult {
  double lossSum = 0;
  std::int64_t correct = 0;
  Index samples = 0;
  std::int64_t predictions = 0;  // samples × labels per sample

  double meanLoss() const { return samples > 0 ? lossSum / static_cast<double>(samples) : 0; }
  double accuracy() const {
    return predictions > 0 ? static_cast<double>(correct) / static_cast<double>(predictions) : 0;
  }
  void add(const BatchResult& other) {
    lossSum += other.lossSum;
    correct += other.correct;
    samples += other.samples;
    predictions += other.predictions;
  }
};

template <class Scalar>
class Model {
 public:
  // Throws std::invalid_argument when consecutive layers do not fit together or two layers
  // share a name. The parameters start at zero: call initialize().
  Model(std::string name, SampleShape input, std::vector<std::unique_ptr<Layer<Scalar>>> layers,
        std::unique_ptr<Loss<Scalar>> loss);
  Model(Model&&) noexcept = default;
  Model& operator=(Model&&) noexcept = default;

  const std::string& name() const { return name_; }
  SampleShape inputShape() const { return input_; }
  Index outputSize() const { return layers_.back()->outputShape().size(); }
  int layerCount() const { return static_cast<int>(layers_.size()); }
  const Layer<Scalar>& layer(int index) const {
    return *layers_.at(static_cast<std::size_t>(index));
  }
  Layer<Scalar>& layer(int index) { return *layers_.at(static_cast<std::size_t>(index)); }
  const Loss<Scalar>& loss() const { return *loss_; }

  std::span<Scalar> parameters() { return {parameterData_, size()}; }
  std::span<const Scalar> parameters() const { return {parameterData_, size()}; }
  std::span<Scalar> gradients() { return {gradientData_, size()}; }
  std::span<const Scalar> gradients() const { return {gradientData_, size()}; }
  // Keeps the gradients in `storage` (parameterCount() elements, owned by the caller and alive as
  // long as the model) from now on instead of the model's own buffer, e.g. in memory that other
  // processes read (engine/shared_gradient_reducer.h). Copies the current gradients there.
  // Throws std::invalid_argument when the size differs.
  void placeGradients(std::span<Scalar> storage);
  std::size_t parameterCount() const { return size(); }
  // Output positions: the last layer's H×W, each with C classes (1 for a classifier's logits).
  Index positions() const {
    const SampleShape out = layers_.back()->outputShape();
    return out.height * out.width;
  }
  BatchRequirements batchRequirements() const {
    return {name_, input_, outputSize(), loss_->needsLabels(), lossPositions()};
  }

  // Every parameter tensor, in buffer order.
  std::span<const ParameterEntry> parameterTable() const { return table_; }
  // The layers that have parameters, in forward (and buffer) order.
  std::span<const LayerParameters> parameterLayers() const { return parameterLayers_; }
  // The entry named e.g. "fc1.weight"; throws std::out_of_range for an unknown name.
  const ParameterEntry& parameter(std::string_view name) const;
  // One line per layer and per parameter tensor: name, kind, shapes, offsets. Equal texts mean
  // equal layouts (what ranks compare at start-up).
  std::string describe() const;

  // He or Xavier weights drawn from `seed` (each layer from its own stream), zero biases. The
  // same seed gives the same bits.
  void initialize(std::uint64_t seed);
  // Allocates everything a step of up to `batch` samples needs.
  void reserve(Index batch);
  Index reservedBatch() const { return capacity_; }

  // Training forward: keeps what backward needs, computes the loss and its gradient. The
  // batch's input memory must stay valid until backward has run. Throws std::invalid_argument
  // for a batch whose sizes do not match the model.
  BatchResult forward(const Batch<Scalar>& batch);
  // Fills gradients() for the last forward(); throws std::logic_error without one.
  void backward(const GradientReadyCallback& onGradientsReady = {});
  // Loss and correct count without backward, in chunks of at most reservedBatch() samples (256
  // when nothing was reserved yet), so a whole test set needs no extra memory. Invalidates a
  // pending backward.
  BatchResult evaluate(const Batch<Scalar>& batch);
  // The model's outputs (outputSize() × B) from the last infer(), the last chunk evaluated, or
  // the last forward(). After forward() they hold the loss's gradient instead where the last
  // layer's backward does not read them (Layer::backwardReadsOutput: linear layers, a GPT's head).
  ConstBatchView<Scalar> outputs() const;
  // Forward without a loss (generation): the outputs for `inputs` (a whole number of samples, at
  // most reservedBatch() of them, or 256 when nothing was reserved). Invalidates a pending backward.
  ConstBatchView<Scalar> infer(std::span<const Scalar> inputs);

  // Memory the model holds, in bytes, for the memory report. Gradients: the flat buffer's (where
  // it lies, placeGradients' storage included) and the tied layers' own. Activations: the two
  // arenas (outputs and their gradients) and every workspace of the layers and the loss, a
  // workspace that layers share counted once; what the reserved batch needs once it has run.
  std::size_t gradientBytes() const;
  std::size_t activationBytes() const;

  // Floating-point operations of the matrix products in forward plus backward, per sample.
  double trainingFlopsPerSample() const;
  // Replaces the observer (an empty function removes it).
  void setLayerObserver(LayerObserver observer) { observer_ = std::move(observer); }

 private:
  std::size_t size() const { return count_; }
  void buildParameterTable();
  void bindLayers();  // every layer's views into parameterData_ and gradientData_
  void tieLayers();   // the tied layers' entries and gradients
  void addTiedGradients(std::size_t owner);
  bool isTied(std::size_t layer) const {
    return std::any_of(ties_.begin(), ties_.end(), [&](const Tie& t) { return t.layer == layer; });
  }
  // The loss's columns per sample: one per position for labels, else the whole output.
  Index lossPositions() const { return loss_->needsLabels() ? positions() : 1; }
  void runLayers(const Scalar* inputs, Index batch, bool training);
  BatchResult run(const Scalar* inputs, Index batch, const Targets<Scalar>& targets, bool training);
  BatchView<Scalar> outputGradient(std::size_t layer, Index batch);

  std::string name_;
  SampleShape input_;
  std::vector<std::unique_ptr<Layer<Scalar>>> layers_;
  std::unique_ptr<Loss<Scalar>> loss_;

  std::size_t count_ = 0;
  Vector<Scalar> parameters_;
  Scalar* parameterData_ = nullptr;  // parameters_
  Vector<Scalar> gradients_;
  Scalar* gradientData_ = nullptr;  // gradients_ or the storage given to placeGradients
  std::vector<ParameterEntry> table_;
  std::vector<LayerParameters> parameterLayers_;
  std::vector<int> parameterLayerOf_;  // per layer: index into parameterLayers_, or -1
  // Layers that read another layer's tensor (Layer::tiedParameter): the tensor and a gradient.
  struct Tie {
    std::size_t layer = 0;
    std::size_t entry = 0;  // into table_
    Vector<Scalar> gradient;
  };
  std::vector<Tie> ties_;
  // Per layer: does backward need the gradient with respect to its input? Only when a layer
  // with parameters lies below it; the first matrix layer's input gradient is never computed.
  std::vector<bool> needsInputGradient_;

  // Activations and their gradients live in two arenas with one region per layer, sized for
  // capacity_ samples; a smaller batch uses the front of each region. A layer whose output is
  // its input (flatten) shares the region of the layer below.
  Index capacity_ = 0;
  std::vector<Index> outputOffsets_;    // per layer, into activations_; -1: its input's memory
  // Per layer, its output's gradient in activationGrads_; -1: the last layer's outputs, which
  // the loss overwrites (Layer::backwardReadsOutput).
  std::vector<Index> gradientOffsets_;
  Workspace<Scalar> activations_;
  Workspace<Scalar> activationGrads_;

  // The last forward: per layer its output, and the input batch and its size.
  std::vector<const Scalar*> outputs_;
  LayerObserver observer_;
  const Scalar* inputData_ = nullptr;
  Index batch_ = 0;
  bool backwardPending_ = false;
};

extern template class Model<float>;
extern template class Model<double>;

}  // namespace ringtrain::models
