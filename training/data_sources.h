// The training and test data a configuration names: linreg's generated points, synthetic images
// or tokens, or the files of --data (MNIST IDX, HDF5, token files).
#pragma once

#include <memory>

#include "training/batch_source.h"
#include "training/config.h"

namespace ringtrain::training {

struct Sources {
  std::unique_ptr<BatchSource> train;
  std::unique_ptr<BatchSource> test;
};

// Every rank reads its own; throws data::DataError (one line naming the file) for bad data.
Sources loadData(const TrainConfig& config);

}  // namespace ringtrain::training
