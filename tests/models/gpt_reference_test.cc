// The GPT against PyTorch, the way llm.c checks its C trainer: gpt_reference/make_fixture.py
// (run by hand, not by the tests) wrote a tiny GPT-2's weights, a batch of tokens and next-token
// targets, the mean loss and every parameter's gradient, all in float64, from a model written in
// PyTorch from the architecture. These tests load that fixture into makeModel's "gpt" under the
// same names and match the loss and every gradient element.
//
// Tolerances (the reference is float64 in both runs). A gradient element's error is
// |ringtrain − PyTorch| / max(|PyTorch|, floor · m), m the largest gradient magnitude of its
// tensor: relative, except for elements far below the tensor's scale, where rounding noise of
// the larger terms that cancelled dominates.
// - float64: the loss within 1e-12 relative, every gradient element within 1e-9 (floor 1e-3).
//   Both sides compute the same sums in different orders (Eigen's and OpenBLAS's products
//   against PyTorch's), which leaves rounding differences of a few 1e-16 grown by the depth of
//   the network and by cancellation; measured: the loss bit-equal, gradients 4e-13. A wrong
//   formula (a missing scale, a transposed head, a dropped residual or tied-gradient term) shows
//   at 1e-3 and above.
// - float32 (what the trainer runs): the loss within 1e-5 relative, every gradient element within
//   1e-4 of its tensor's largest gradient magnitude (floor 1). float32 rounds each value at 6e-8
//   relative; sums of up to 4C = 64 terms through the blocks make that about 1e-6 here
//   (measured: loss 4e-8, gradients 6e-7).
// The worst errors measured are printed (and recorded as test properties).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/model_factory.h"

namespace ringtrain::models {
namespace {

struct Tolerance {
  double loss = 0;      // relative
  double gradient = 0;  // of max(|PyTorch|, floor · the tensor's largest gradient magnitude)
  double floor = 0;
};
constexpr Tolerance kFloat64Tolerance{.loss = 1e-12, .gradient = 1e-9, .floor = 1e-3};
constexpr Tolerance kFloat32Tolerance{.loss = 1e-5, .gradient = 1e-4, .floor = 1};

struct NamedTensor {
  std::string name;
  std::vector<Index> shape;
  std::vector<double> values;
};

struct Fixture {
  GptShape shape;
  Index batch = 0;
  std::vector<std::int32_t> tokens;   // B·T, sample after sample
  std::vector<std::int32_t> targets;  // the next token of each
  double loss = 0;
  std::vector<NamedTensor> parameters;  // ringtrain's order
  std::vector<NamedTensor> gradients;   // the same order
};

// Reads the text format make_fixture.py documents; throws std::runtime_error saying what is
// wrong.
class FixtureReader {
 public:
  explicit FixtureReader(const std::string& path) : path_(path) {
    std::ifstream file(path);
    if (!file)
      throw std::runtime_error(path + ": cannot open (write it with make_fixture.py)");
    std::string line;
    std::ostringstream text;
    while (std::getline(file, line))
      if (line.empty() || line[0] != '#')
        text << line << '\n';
    in_.str(text.str());
  }

  Fixture read() {
    Fixture fixture;
    expect("ringtrain-gpt-fixture");
    if (integer() != 1)
      fail("unknown format version");
    expect("config");
    fixture.shape = {.layers = integer(), .heads = integer(), .width = integer(),
                     .context = integer(), .vocabulary = integer()};
    fixture.batch = integer();
    fixture.tokens = ids("tokens");
    fixture.targets = ids("targets");
    expect("loss");
    fixture.loss = number();
    std::string word;
    while (in_ >> word && word != "end") {
      if (word == "param")
        fixture.parameters.push_back(tensor());
      else if (word == "grad")
        fixture.gradients.push_back(tensor());
      else
        fail("unexpected '" + word + "'");
    }
    if (word != "end")
      fail("no 'end': truncated");
    return fixture;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error(path_ + ": " + what);
  }
  void expect(const std::string& keyword) {
    std::string word;
    if (!(in_ >> word) || word != keyword)
      fail("expected '" + keyword + "', found '" + word + "'");
  }
  Index integer() {
    Index value = 0;
    if (!(in_ >> value))
      fail("expected an integer");
    return value;
  }
  double number() {
    double value = 0;
    if (!(in_ >> value))
      fail("expected a number");
    return value;
  }
  std::vector<std::int32_t> ids(const std::string& keyword) {
    expect(keyword);
    std::vector<std::int32_t> values(static_cast<std::size_t>(integer()));
    for (std::int32_t& v : values)
      v = static_cast<std::int32_t>(integer());
    return values;
  }
  NamedTensor tensor() {
    NamedTensor t;
    if (!(in_ >> t.name))
      fail("expected a tensor name");
    t.shape.resize(static_cast<std::size_t>(integer()));
    Index count = 1;
    for (Index& d : t.shape)
      count *= (d = integer());
    t.values.resize(static_cast<std::size_t>(count));
    for (double& v : t.values)
      v = number();
    return t;
  }

  std::string path_;
  std::istringstream in_;
};

const Fixture& fixture() {
  static const Fixture loaded = FixtureReader(RINGTRAIN_GPT_FIXTURE).read();
  return loaded;
}

ModelSpec specFor(const Fixture& f) {
  ModelSpec spec{.name = "gpt", .input = {1, f.shape.context, 1}};
  spec.gpt = f.shape;
  return spec;
}

// ringtrain's loss and gradients (as doubles) for the fixture's weights and batch.
struct Run {
  double loss = 0;
  std::vector<std::vector<double>> gradients;  // per fixture tensor
};

template <class Scalar>
Run runRingtrain(const Fixture& f) {
  Model<Scalar> model = makeModel<Scalar>(specFor(f));
  std::span<Scalar> parameters = model.parameters();
  for (const NamedTensor& t : f.parameters) {
    const ParameterEntry& entry = model.parameter(t.name);
    for (std::size_t i = 0; i < t.values.size(); ++i)
      parameters[entry.offset + i] = static_cast<Scalar>(t.values[i]);
  }
  const std::vector<Scalar> tokens(f.tokens.begin(), f.tokens.end());
  const BatchResult result = model.forward({tokens, f.targets, {}});
  model.backward();
  EXPECT_EQ(result.samples, f.batch);
  EXPECT_EQ(result.predictions, f.batch * f.shape.context);
  Run run{.loss = result.meanLoss(), .gradients = {}};
  for (const NamedTensor& t : f.gradients) {
    const ParameterEntry& entry = model.parameter(t.name);
    const auto g = model.gradients().subspan(entry.offset, entry.count);
    run.gradients.emplace_back(g.begin(), g.end());
  }
  return run;
}

struct Worst {
  double loss = 0;      // |ringtrain − PyTorch| / |PyTorch|
  double gradient = 0;  // the largest element error, as Tolerance::gradient measures it
  std::string tensor;
  std::size_t index = 0;
};

// Checks a run against the fixture; returns the worst errors.
Worst compare(const Fixture& f, const Run& run, const Tolerance& tolerance) {
  Worst worst;
  worst.loss = std::abs(run.loss - f.loss) / std::abs(f.loss);
  EXPECT_LT(worst.loss, tolerance.loss) << "loss " << run.loss << ", PyTorch " << f.loss;
  for (std::size_t t = 0; t < f.gradients.size(); ++t) {
    const NamedTensor& reference = f.gradients[t];
    double scale = 0;
    for (double r : reference.values)
      scale = std::max(scale, std::abs(r));
    EXPECT_GT(scale, 0) << reference.name << ": a zero gradient checks nothing";
    std::size_t failures = 0;
    for (std::size_t i = 0; i < reference.values.size(); ++i) {
      const double error = std::abs(run.gradients[t][i] - reference.values[i]) /
                           std::max(std::abs(reference.values[i]), tolerance.floor * scale);
      if (error > worst.gradient)
        worst = {worst.loss, error, reference.name, i};
      if (!(error < tolerance.gradient) && ++failures <= 3)
        ADD_FAILURE() << reference.name << "[" << i << "]: ringtrain " << run.gradients[t][i]
                      << ", PyTorch " << reference.values[i] << " (tensor's largest " << scale
                      << "): error " << error;
    }
    EXPECT_EQ(failures, 0u) << reference.name << ": elements outside the tolerance";
  }
  return worst;
}

void report(const char* precision, const Worst& worst) {
  std::printf("[ reference] %s: loss relative error %.3g; worst gradient error %.3g (%s[%zu])\n",
              precision, worst.loss, worst.gradient, worst.tensor.c_str(), worst.index);
  ::testing::Test::RecordProperty(std::string(precision) + "_loss_error",
                                  std::to_string(worst.loss));
  ::testing::Test::RecordProperty(std::string(precision) + "_gradient_error",
                                  std::to_string(worst.gradient));
}

TEST(GptReferenceTest, FixtureCoversRingtrainsParameterTableInOrder) {
  const Fixture& f = fixture();
  ASSERT_EQ(f.tokens.size(), static_cast<std::size_t>(f.batch * f.shape.context));
  ASSERT_EQ(f.targets.size(), f.tokens.size());
  const Model<double> model = makeModel<double>(specFor(f));
  const auto table = model.parameterTable();
  ASSERT_EQ(f.parameters.size(), table.size());
  ASSERT_EQ(f.gradients.size(), table.size());
  for (std::size_t i = 0; i < table.size(); ++i) {
    EXPECT_EQ(f.parameters[i].name, table[i].name);
    EXPECT_EQ(f.parameters[i].shape, table[i].shape) << table[i].name;
    EXPECT_EQ(f.gradients[i].name, table[i].name);
    EXPECT_EQ(f.gradients[i].shape, table[i].shape) << table[i].name;
  }
}

TEST(GptReferenceTest, Float64LossAndEveryGradientMatchPyTorch) {
  const Fixture& f = fixture();
  const Worst worst = compare(f, runRingtrain<double>(f), kFloat64Tolerance);
  report("float64", worst);
}

TEST(GptReferenceTest, Float32LossAndEveryGradientMatchPyTorch) {
  const Fixture& f = fixture();
  const Worst worst = compare(f, runRingtrain<float>(f), kFloat32Tolerance);
  report("float32", worst);
}

}  // namespace
}  // namespace ringtrain::models
