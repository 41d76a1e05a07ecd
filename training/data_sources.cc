#include "training/data_sources.h"

#include <algorithm>
#include <cstdint>

#include "data/data_folder.h"
#include "data/synthetic_dataset.h"
#include "data/synthetic_token_dataset.h"

namespace ringtrain::training {

Sources loadData(const TrainConfig& config) {
  Sources sources;
  if (config.model == ModelKind::kLinreg) {
    // y = 2x + 10 plus noise: 8,000 samples to train on, the next 2,000 to test.
    data::LinearRegressionOptions options;
    options.seed = config.seed;
    sources.train = regressionSource(options);
    options.firstIndex = options.size;
    options.size = 2000;
    sources.test = regressionSource(options);
  } else if (config.synthetic && config.model == ModelKind::kGpt) {
    data::SyntheticTokenOptions options;
    options.vocabulary = config.gpt.vocabulary;
    options.context = config.gpt.context;
    options.size = config.syntheticSize;
    options.seed = config.seed;
    data::DatasetPair pair = data::makeSyntheticTokenPair(
        options, std::max<std::int64_t>(1, std::min<std::int64_t>(256, config.syntheticSize / 8)));
    sources.train = classificationSource(std::move(pair.train));
    sources.test = classificationSource(std::move(pair.test));
  } else if (config.synthetic) {
    data::SyntheticOptions options;
    options.shape = {config.syntheticShape[0], config.syntheticShape[1], config.syntheticShape[2]};
    options.numClasses = config.syntheticClasses;
    options.size = config.syntheticSize;
    options.seed = config.seed;
    data::DatasetPair pair = data::makeSyntheticPair(
        options,
        std::max<std::int64_t>(1, std::min<std::int64_t>(10000, config.syntheticSize / 6)));
    sources.train = classificationSource(std::move(pair.train));
    sources.test = classificationSource(std::move(pair.test));
  } else {
    data::TokenOptions tokens;  // a language model reads token files, in windows of its context
    if (config.model == ModelKind::kGpt)
      tokens = {config.gpt.context, static_cast<int>(config.gpt.vocabulary)};
    data::DatasetPair pair = data::loadDataFolder(config.dataDir, tokens);
    sources.train = classificationSource(std::move(pair.train));
    sources.test = classificationSource(std::move(pair.test));
  }
  return sources;
}

}  // namespace ringtrain::training
