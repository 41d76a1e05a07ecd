#include "models/model.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace ringtrain::models {
namespace {

// Regions start on 64-byte boundaries, so every layer's batch starts where a vector load can.
Index roundUpToCacheLine(Index elements, std::size_t scalarBytes) {
  const Index perLine = static_cast<Index>(64 / scalarBytes);
  return (elements + perLine - 1) / perLine * perLine;
}

std::string shapeText(const std::vector<Index>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i)
    text += (i > 0 ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

}  // namespace

template <class Scalar>
Model<Scalar>::Model(std::string name, SampleShape input,
                     std::vector<std::unique_ptr<Layer<Scalar>>> layers,
                     std::unique_ptr<Loss<Scalar>> loss)
    : name_(std::move(name)), input_(input), layers_(std::move(layers)), loss_(std::move(loss)) {
  if (layers_.empty() || !loss_)
    throw std::invalid_argument("model '" + name_ + "': needs at least one layer and a loss");
  std::set<std::string> names;
  Index size = input_.size();
  for (const auto& layer : layers_) {
    if (layer->inputShape().size() != size)
      throw std::invalid_argument("model '" + name_ + "': layer '" + layer->name() + "' takes " +
                                  toString(layer->inputShape()) + " but receives " +
                                  std::to_string(size) + " values per sample");
    if (!names.insert(layer->name()).second)
      throw std::invalid_argument("model '" + name_ + "': two layers are named '" + layer->name() +
                                  "'");
    size = layer->outputShape().size();
  }
  buildParameterTable();
  tieLayers();
}

template <class Scalar>
void Model<Scalar>::tieLayers() {
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const std::optional<ParameterShape> tied = layers_[i]->tiedParameter();
    if (!tied) continue;
    const auto found = std::find_if(table_.begin(), table_.end(), [&](const ParameterEntry& e) {
      return e.name == tied->name && e.layerIndex < static_cast<int>(i);
    });
    if (found == table_.end() || found->shape != tied->shape)
      throw std::invalid_argument("model '" + name_ + "': layer '" + layers_[i]->name() +
                                  "' reads " + tied->name + " " + shapeText(tied->shape) +
                                  ", which no earlier layer has");
    const auto entry = static_cast<std::size_t>(found - table_.begin());
    ties_.push_back({i, entry, Vector<Scalar>::Zero(static_cast<Index>(found->count))});
  }
  bindLayers();
}

template <class Scalar>
void Model<Scalar>::addTiedGradients(std::size_t owner) {
  for (const Tie& tie : ties_) {
    const ParameterEntry& entry = table_[tie.entry];
    if (entry.layerIndex != static_cast<int>(owner)) continue;
    VectorView<Scalar>(gradientData_ + entry.offset, static_cast<Index>(entry.count)) +=
        tie.gradient;
  }
}

template <class Scalar>
void Model<Scalar>::buildParameterTable() {
  std::size_t offset = 0;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const Layer<Scalar>& layer = *layers_[i];
    const std::size_t layerStart = offset;
    for (const ParameterShape& p : layer.parameterShapes()) {
      const auto count = static_cast<std::size_t>(p.count());
      table_.push_back({static_cast<int>(i), layer.name() + "." + p.name, p.shape, offset, count});
      offset += count;
    }
    parameterLayerOf_.push_back(-1);
    if (offset > layerStart) {
      parameterLayerOf_.back() = static_cast<int>(parameterLayers_.size());
      parameterLayers_.push_back(
          {static_cast<int>(i), layer.name(), layerStart, offset - layerStart});
    }
  }
  count_ = offset;
  parameters_ = Vector<Scalar>::Zero(static_cast<Index>(offset));
  parameterData_ = parameters_.data();
  gradients_ = Vector<Scalar>::Zero(static_cast<Index>(offset));
  gradientData_ = gradients_.data();
  bindLayers();
  bool parametersBelow = false;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    needsInputGradient_.push_back(parametersBelow);
    parametersBelow = parametersBelow || parameterLayerOf_[i] >= 0;
  }
}

template <class Scalar>
const ParameterEntry& Model<Scalar>::parameter(std::string_view name) const {
  for (const ParameterEntry& entry : table_)
    if (entry.name == name) return entry;
  throw std::out_of_range("model '" + name_ + "' has no parameter '" + std::string(name) + "'");
}

template <class Scalar>
std::string Model<Scalar>::describe() const {
  std::ostringstream out;
  out << name_ << ": input " << toString(input_) << ", " << size() << " parameters, loss "
      << loss_->kind() << "\n";
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const Layer<Scalar>& layer = *layers_[i];
    out << "  " << i << " " << layer.name() << " " << layer.kind() << " "
        << toString(layer.inputShape()) << " -> " << toString(layer.outputShape()) << "\n";
    for (const ParameterEntry& entry : table_) {
      if (entry.layerIndex != static_cast<int>(i)) continue;
      out << "      " << entry.name << " " << shapeText(entry.shape) << " offset " << entry.offset
          << " count " << entry.count << "\n";
    }
  }
  return out.str();
}

template <class Scalar>
void Model<Scalar>::bindLayers() {
  for (const LayerParameters& slice : parameterLayers_) {
    layers_[static_cast<std::size_t>(slice.layerIndex)]->bind(parameterData_ + slice.offset,
                                                              gradientData_ + slice.offset);
  }
  for (Tie& tie : ties_)
    layers_[tie.layer]->bind(parameterData_ + table_[tie.entry].offset, tie.gradient.data());
}

template <class Scalar>
void Model<Scalar>::placeGradients(std::span<Scalar> storage) {
  if (storage.size() != size()) {
    throw std::invalid_argument("placeGradients: the model has " + std::to_string(size()) +
                                " parameters but the storage holds " +
                                std::to_string(storage.size()));
  }
  std::copy_n(gradientData_, size(), storage.data());
  gradientData_ = storage.data();
  bindLayers();
  gradients_ = Vector<Scalar>();  // the model's own buffer is no longer used
}

template <class Scalar>
void Model<Scalar>::initialize(std::uint64_t seed) {
  for (const LayerParameters& slice : parameterLayers_) {
    SplitMix64 generator = layerGenerator(seed, slice.layerIndex);
    layers_[static_cast<std::size_t>(slice.layerIndex)]->initialize(generator);
  }
}

template <class Scalar>
void Model<Scalar>::reserve(Index batch) {
  if (batch <= capacity_) return;
  const std::size_t n = layers_.size();
  outputOffsets_.assign(n, -1);
  gradientOffsets_.assign(n, -1);
  Index activationsSize = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (layers_[i]->outputIsInput()) continue;
    outputOffsets_[i] = activationsSize;
    activationsSize += roundUpToCacheLine(layers_[i]->outputShape().size() * batch, sizeof(Scalar));
  }
  // Gradients are laid out from the top: the gradient of a flatten's output is that of its input.
  // The loss writes the last layer's over its outputs where its backward does not read them.
  const Layer<Scalar>& last = *layers_.back();
  const bool lossGradientInPlace = !last.outputIsInput() && !last.backwardReadsOutput();
  Index gradientsSize = 0;
  for (std::size_t i = n; i-- > 0;) {
    if (i + 1 < n && layers_[i + 1]->outputIsInput()) {
      gradientOffsets_[i] = gradientOffsets_[i + 1];
      continue;
    }
    if (i + 1 == n && lossGradientInPlace) continue;  // over the outputs (-1)
    gradientOffsets_[i] = gradientsSize;
    gradientsSize += roundUpToCacheLine(layers_[i]->outputShape().size() * batch, sizeof(Scalar));
  }
  activations_.reserve(activationsSize);
  activationGrads_.reserve(gradientsSize);
  for (const auto& layer : layers_)
    layer->reserve(batch);
  loss_->reserve(outputSize() / lossPositions(), batch * lossPositions());
  outputs_.assign(n, nullptr);
  capacity_ = batch;
  backwardPending_ = false;  // the regions moved
}

template <class Scalar>
std::size_t Model<Scalar>::gradientBytes() const {
  std::size_t bytes = size() * sizeof(Scalar);
  for (const Tie& tie : ties_)
    bytes += static_cast<std::size_t>(tie.gradient.size()) * sizeof(Scalar);
  return bytes;
}

template <class Scalar>
std::size_t Model<Scalar>::activationBytes() const {
  HeldMemoryList held = {activations_.held(), activationGrads_.held()};
  for (const auto& layer : layers_)
    layer->listWorkspaces(held);
  loss_->listWorkspaces(held);
  std::set<const void*> counted;
  std::size_t bytes = 0;
  for (const HeldMemory& block : held) {
    if (block.bytes > 0 && counted.insert(block.data).second) bytes += block.bytes;
  }
  return bytes;
}

template <class Scalar>
BatchView<Scalar> Model<Scalar>::outputGradient(std::size_t layer, Index batch) {
  Scalar* data = gradientOffsets_[layer] >= 0 ? activationGrads_.data() + gradientOffsets_[layer]
                                              : activations_.data() + outputOffsets_[layer];
  return {data, layers_[layer]->outputShape().size(), batch};
}

Index BatchRequirements::countSamples(std::size_t inputs, std::size_t labelCount,
                                      std::size_t values) const {
  const auto sampleSize = static_cast<std::size_t>(input.size());
  if (inputs == 0 || inputs % sampleSize != 0)
    throw std::invalid_argument("model '" + model + "': a batch of " + std::to_string(inputs) +
                                " input values is not a whole, non-zero number of " +
                                toString(input) + " samples");
  const auto samples = inputs / sampleSize;
  // Checked here as well as in the loss: evaluate() cuts the targets into chunks first.
  const auto expectedLabels = samples * static_cast<std::size_t>(labelsPerSample);
  if (labels && labelCount != expectedLabels)
    throw std::invalid_argument("model '" + model + "': " + std::to_string(labelCount) +
                                " labels for a batch of " + std::to_string(samples) +
                                " samples of " + std::to_string(labelsPerSample) + " labels");
  const auto expectedValues = samples * static_cast<std::size_t>(outputs);
  if (!labels && values != expectedValues)
    throw std::invalid_argument("model '" + model + "': " + std::to_string(values) +
                                " target values for a batch of " + std::to_string(samples) +
                                " samples of " + std::to_string(outputs) + " outputs");
  return static_cast<Index>(samples);
}

template <class Scalar>
void Model<Scalar>::runLayers(const Scalar* inputs, Index batch, bool training) {
  reserve(batch);
  const Scalar* x = inputs;
  Index xSize = input_.size();
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    Layer<Scalar>& layer = *layers_[i];
    const Index ySize = layer.outputShape().size();
    if (!layer.outputIsInput()) {
      const bool observed = training && observer_;
      if (observed) observer_(static_cast<int>(i), LayerPhase::kForward, true);
      Scalar* y = activations_.data() + outputOffsets_[i];
      layer.forward(ConstBatchView<Scalar>(x, xSize, batch), BatchView<Scalar>(y, ySize, batch));
      if (observed) observer_(static_cast<int>(i), LayerPhase::kForward, false);
      x = y;
    }
    outputs_[i] = x;
    xSize = ySize;
  }
  inputData_ = inputs;
  batch_ = batch;
}

template <class Scalar>
BatchResult Model<Scalar>::run(const Scalar* inputs, Index batch, const Targets<Scalar>& targets,
                               bool training) {
  runLayers(inputs, batch, training);
  // The loss sees one column per position: classes × (positions · B).
  const Index positions = lossPositions();
  const Index rows = outputSize() / positions;
  const Index columns = batch * positions;
  BatchView<Scalar> gradient(outputGradient(layers_.size() - 1, batch).data(), rows, columns);
  const LossTotals totals = loss_->compute(ConstBatchView<Scalar>(outputs_.back(), rows, columns),
                                           targets, training ? &gradient : nullptr);
  return {totals.loss / static_cast<double>(positions), totals.correct, batch, columns};
}

template <class Scalar>
ConstBatchView<Scalar> Model<Scalar>::infer(std::span<const Scalar> inputs) {
  backwardPending_ = false;
  const auto sampleSize = static_cast<std::size_t>(input_.size());
  if (inputs.empty() || inputs.size() % sampleSize != 0)
    throw std::invalid_argument("model '" + name_ + "': infer needs whole samples of " +
                                toString(input_));
  const auto samples = static_cast<Index>(inputs.size() / sampleSize);
  if (capacity_ == 0) reserve(std::min<Index>(samples, 256));
  if (samples > capacity_)
    throw std::invalid_argument("model '" + name_ + "': infer on " + std::to_string(samples) +
                                " samples, more than the " + std::to_string(capacity_) +
                                " reserved");
  runLayers(inputs.data(), samples, /*training=*/false);
  return outputs();
}

template <class Scalar>
BatchResult Model<Scalar>::forward(const Batch<Scalar>& batch) {
  backwardPending_ = false;
  const Index samples = batchRequirements().countSamples(batch);
  const BatchResult result =
      run(batch.inputs.data(), samples, {batch.labels, batch.values}, /*training=*/true);
  backwardPending_ = true;
  return result;
}

template <class Scalar>
void Model<Scalar>::backward(const GradientReadyCallback& onGradientsReady) {
  if (!backwardPending_)
    throw std::logic_error("model '" + name_ +
                           "': backward() needs a forward() on a batch first, once per forward");
  backwardPending_ = false;
  const Index batch = batch_;
  for (std::size_t i = layers_.size(); i-- > 0;) {
    Layer<Scalar>& layer = *layers_[i];
    if (layer.outputIsInput()) continue;  // its input gradient is its output gradient
    const Scalar* x = i == 0 ? inputData_ : outputs_[i - 1];
    const ConstBatchView<Scalar> in(x, layer.inputShape().size(), batch);
    const BatchView<Scalar> gradient = outputGradient(i, batch);
    const ConstBatchView<Scalar> dy(gradient.data(), gradient.rows(), batch);
    if (observer_) observer_(static_cast<int>(i), LayerPhase::kBackward, true);
    const int slice = parameterLayerOf_[i];
    const LayerParameters* parameters =
        slice >= 0 ? &parameterLayers_[static_cast<std::size_t>(slice)] : nullptr;
    if (parameters || isTied(i)) layer.backwardParameters(in, dy);
    if (parameters) {
      addTiedGradients(i);
      if (onGradientsReady) onGradientsReady(*parameters);
    }
    if (needsInputGradient_[i]) {
      layer.backwardInput(in, ConstBatchView<Scalar>(outputs_[i], dy.rows(), batch), dy,
                          outputGradient(i - 1, batch));
    }
    if (observer_) observer_(static_cast<int>(i), LayerPhase::kBackward, false);
  }
}

template <class Scalar>
BatchResult Model<Scalar>::evaluate(const Batch<Scalar>& batch) {
  backwardPending_ = false;
  const Index samples = batchRequirements().countSamples(batch);
  if (capacity_ == 0) reserve(std::min<Index>(samples, 256));
  const Index chunk = capacity_;
  const auto sampleSize = static_cast<std::size_t>(input_.size());
  const auto outputs = static_cast<std::size_t>(outputSize());
  BatchResult total;
  for (Index start = 0; start < samples; start += chunk) {
    const Index n = std::min(chunk, samples - start);
    const auto first = static_cast<std::size_t>(start);
    const auto count = static_cast<std::size_t>(n);
    Targets<Scalar> targets;
    if (loss_->needsLabels()) {
      const auto perSample = static_cast<std::size_t>(positions());
      targets.labels = batch.labels.subspan(first * perSample, count * perSample);
    } else {
      targets.values = batch.values.subspan(first * outputs, count * outputs);
    }
    const BatchResult part =
        run(batch.inputs.data() + first * sampleSize, n, targets, /*training=*/false);
    total.add(part);
  }
  return total;
}

template <class Scalar>
ConstBatchView<Scalar> Model<Scalar>::outputs() const {
  if (batch_ == 0) return {nullptr, outputSize(), 0};
  return {outputs_.back(), outputSize(), batch_};
}

template <class Scalar>
double Model<Scalar>::trainingFlopsPerSample() const {
  double flops = 0;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const double forward = layers_[i]->forwardFlopsPerSample();
    const double weightGradient = parameterLayerOf_[i] >= 0 || isTied(i) ? forward : 0;
    const double inputGradient = needsInputGradient_[i] ? forward : 0;
    flops += forward + weightGradient + inputGradient;
  }
  return flops;
}

template class Model<float>;
template class Model<double>;

}  // namespace ringtrain::models
