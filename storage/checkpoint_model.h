// Between a model's flat buffers and a checkpoint's named tensors.
//
// Written against any parameter-table entry with name, shape, offset and count fields
// (models::ParameterEntry), so the checkpoint library needs neither models/ nor Eigen; the
// trainer calls these with model.parameterTable().
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "storage/checkpoint.h"

namespace ringtrain::storage {

// One tensor per table entry, its values copied out of `flat` (the parameters, or any buffer
// laid out like them).
template <class Entry>
std::vector<Tensor> tensorsFromTable(std::span<const Entry> table, std::span<const float> flat) {
  std::vector<Tensor> tensors;
  tensors.reserve(table.size());
  for (const Entry& entry : table) {
    Tensor tensor;
    tensor.name = entry.name;
    tensor.shape.assign(entry.shape.begin(), entry.shape.end());
    const auto first = flat.begin() + static_cast<std::ptrdiff_t>(entry.offset);
    tensor.values.assign(first, first + static_cast<std::ptrdiff_t>(entry.count));
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

// For each table entry, the saved tensor of its name (anything with name and shape: a Tensor, a
// SafetensorsEntry), in table order, once every name and shape matches. Throws CheckpointError
// naming `file` when a tensor is missing, has another shape, or when the file holds a tensor the
// table does not know (a model of another layout). Looks at names and shapes only, so a caller
// can check a file before reading its data.
template <class Saved, class Entry>
std::vector<const Saved*> matchTensorsToTable(const std::vector<Saved>& tensors,
                                              std::span<const Entry> table,
                                              const std::filesystem::path& file) {
  const auto shapeText = [](const auto& shape) {
    std::string text;
    for (const auto d : shape)
      text += (text.empty() ? "" : "x") + std::to_string(d);
    return text;
  };
  std::vector<const Saved*> matched;
  for (const Entry& entry : table) {
    const auto found = std::find_if(tensors.begin(), tensors.end(),
                                    [&](const Saved& t) { return t.name == entry.name; });
    if (found == tensors.end()) {
      throw CheckpointError(file.string() + ": has no parameter " + entry.name);
    }
    const std::vector<std::int64_t> expected(entry.shape.begin(), entry.shape.end());
    if (found->shape != expected) {
      throw CheckpointError(file.string() + ": parameter " + entry.name + " is " +
                            shapeText(found->shape) + " but the model's is " + shapeText(expected));
    }
    matched.push_back(&*found);
  }
  if (tensors.size() != table.size()) {
    for (const Saved& t : tensors) {
      const bool known =
          std::any_of(table.begin(), table.end(), [&](const Entry& e) { return e.name == t.name; });
      if (!known) {
        throw CheckpointError(file.string() + ": has parameter " + t.name +
                              ", which the model does not");
      }
    }
  }
  return matched;
}

// Copies each table entry's tensor, found by name, into its place in `flat`. Throws
// CheckpointError as matchTensorsToTable does, and for a tensor whose values do not fill its
// entry.
template <class Entry>
void copyTensorsToFlat(const std::vector<Tensor>& tensors, std::span<const Entry> table,
                       std::span<float> flat, const std::filesystem::path& file) {
  const std::vector<const Tensor*> matched = matchTensorsToTable(tensors, table, file);
  for (std::size_t i = 0; i < table.size(); ++i) {
    const Entry& entry = table[i];
    if (matched[i]->values.size() != entry.count || entry.offset + entry.count > flat.size()) {
      throw CheckpointError(file.string() + ": parameter " + entry.name + " has " +
                            std::to_string(matched[i]->values.size()) + " values but the model's " +
                            std::to_string(entry.count));
    }
    std::copy(matched[i]->values.begin(), matched[i]->values.end(),
              flat.begin() + static_cast<std::ptrdiff_t>(entry.offset));
  }
}

// The names of Optimizer::state()'s buffers, in its order (PyTorch's names, so a reader of the
// file recognises them): sgd {"momentum"}, adam and adamw {"exp_avg", "exp_avg_sq"}.
inline std::vector<std::string> optimizerStateNames(std::string_view kind) {
  if (kind == "sgd") return {"momentum"};
  if (kind == "adam" || kind == "adamw") return {"exp_avg", "exp_avg_sq"};
  return {};
}

// The name of state buffer i: optimizerStateNames(kind)[i], or state_<i> beyond them.
inline std::string optimizerStateName(std::string_view kind, std::size_t i) {
  const std::vector<std::string> names = optimizerStateNames(kind);
  return i < names.size() ? names[i] : "state_" + std::to_string(i);
}

// The optimiser's state buffers (Optimizer::state()) as tensors, named by optimizerStateName.
inline std::vector<Tensor> optimizerStateTensors(std::string_view kind,
                                                 const std::vector<std::span<float>>& state) {
  std::vector<Tensor> tensors;
  for (std::size_t i = 0; i < state.size(); ++i) {
    Tensor t;
    t.name = optimizerStateName(kind, i);
    t.shape = {static_cast<std::int64_t>(state[i].size())};
    t.values.assign(state[i].begin(), state[i].end());
    tensors.push_back(std::move(t));
  }
  return tensors;
}

// Copies saved state tensors back into the optimiser's buffers (Optimizer::state()), matched by
// name; throws CheckpointError naming `file` for a missing buffer or one of another length.
inline void restoreOptimizerState(const CheckpointContent& saved, std::string_view kind,
                                  const std::vector<std::span<float>>& state,
                                  const std::filesystem::path& file) {
  if (saved.optimizerKind != kind) {
    throw CheckpointError(file.string() + ": optimiser state of " + saved.optimizerKind +
                          " but this run uses " + std::string(kind));
  }
  for (std::size_t i = 0; i < state.size(); ++i) {
    const std::string name = optimizerStateName(kind, i);
    const auto found = std::find_if(saved.optimizerState.begin(), saved.optimizerState.end(),
                                    [&](const Tensor& t) { return t.name == name; });
    if (found == saved.optimizerState.end() || found->values.size() != state[i].size()) {
      throw CheckpointError(file.string() + ": optimiser state " + name +
                            (found == saved.optimizerState.end()
                                 ? " is missing"
                                 : " has " + std::to_string(found->values.size()) +
                                       " values but this run needs " +
                                       std::to_string(state[i].size())));
    }
    std::copy(found->values.begin(), found->values.end(), state[i].begin());
  }
}

}  // namespace ringtrain::storage
