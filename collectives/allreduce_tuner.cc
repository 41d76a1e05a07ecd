#include "collectives/allreduce_tuner.h"

#include <algorithm>
#include <cmath>

#include "collectives/tuned_communicator.h"

namespace ringtrain::collectives {

// One algorithm of the tuned backend, alone at every size it can take.
struct AllreduceTuner::Candidate {
  AllreduceAlgorithm algorithm;
  std::unique_ptr<Communicator> comm;
  bool takes(std::size_t bytes) const {
    return algorithm != AllreduceAlgorithm::kRecursiveDoubling ||
           bytes <= kMaxRecursiveDoublingBytes;
  }
};

namespace {

// The median of `times` (infinity for none).
double median(std::vector<double> times) {
  if (times.empty()) return HUGE_VAL;
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// The fastest of `times`, unless `previous` (-1 for none) is within `margin` of it.
std::size_t pick(const std::vector<double>& times, int previous, double margin) {
  const auto best =
      static_cast<std::size_t>(std::min_element(times.begin(), times.end()) - times.begin());
  if (previous >= 0 && times[static_cast<std::size_t>(previous)] <= times[best] * (1 + margin))
    return static_cast<std::size_t>(previous);
  return best;
}

// Adjacent sizes with one algorithm become one rule; the last rule holds every larger size,
// except recursive doubling, which stops at the largest size measured (the ring takes the rest).
std::vector<TuningRule> mergeRules(
    const std::vector<std::pair<std::size_t, AllreduceAlgorithm>>& choices) {
  std::vector<TuningRule> rules;
  for (const auto& [bytes, algorithm] : choices) {
    if (!rules.empty() && rules.back().algorithm == algorithm)
      rules.back().maxBytes = bytes;
    else
      rules.push_back({bytes, algorithm});
  }
  if (rules.back().algorithm == AllreduceAlgorithm::kRecursiveDoubling)
    rules.push_back({kUnboundedBytes, AllreduceAlgorithm::kRing});
  rules.back().maxBytes = kUnboundedBytes;
  return rules;
}

}  // namespace

AllreduceTuner::AllreduceTuner(MPI_Comm comm, const CommunicatorOptions& options,
                               const RankLayout& layout, TunerOptions tuner)
    : layout_(layout), tuner_(tuner) {
  for (const auto& [algorithm, label] : kAllreduceAlgorithmNames) {
    if (algorithm == AllreduceAlgorithm::kHierarchical && layout.oneNode()) continue;
    candidates_.push_back({algorithm, std::make_unique<TunedCommunicator>(
                                          comm, options, singleAlgorithmTable(layout, algorithm))});
  }
}

AllreduceTuner::~AllreduceTuner() = default;

std::vector<AllreduceAlgorithm> AllreduceTuner::algorithms() const {
  std::vector<AllreduceAlgorithm> all;
  for (const Candidate& candidate : candidates_)
    all.push_back(candidate.algorithm);
  return all;
}

TunedSize AllreduceTuner::tuneSize(std::size_t bytes, const TimeCalls& time) {
  const std::size_t n = candidates_.size();
  std::vector<std::vector<double>> inPlace(n), outOfPlace(n);
  for (int round = 0; round < tuner_.rounds; ++round) {
    for (std::size_t i = 0; i < n; ++i) {
      if (!candidates_[i].takes(bytes)) continue;
      outOfPlace[i].push_back(time(*candidates_[i].comm, false));
      inPlace[i].push_back(time(*candidates_[i].comm, true));
    }
  }
  TunedSize tuned;
  tuned.bytes = bytes;
  for (std::size_t i = 0; i < n; ++i) {
    tuned.inPlaceUs.push_back(median(inPlace[i]));
    tuned.outOfPlaceUs.push_back(median(outOfPlace[i]));
  }
  previous_ = static_cast<int>(pick(tuned.inPlaceUs, previous_, tuner_.margin));
  tuned.chosen = candidates_[static_cast<std::size_t>(previous_)].algorithm;
  choices_.emplace_back(bytes, tuned.chosen);
  return tuned;
}

TuningTable AllreduceTuner::table() const {
  return {layout_, cpuModel(), ringtrainBuild(), mergeRules(choices_)};
}

}  // namespace ringtrain::collectives
