// A model ringtrain does not know: a one-hidden-layer MLP for binary classification, written
// with plain loops, trained with full-batch SGD. Each rank takes its share of the batch; the
// gradient exchange averages the gradients, so N ranks take the same steps as one rank with the
// whole batch (up to float32 reassociation), and every rank ends with the same parameters.
//   mpirun -np 2 mlp_example [steps [file]]
// Prints, per rank, the loss before and after and every final parameter: on standard output, or
// with `file` into file.RANK (one file per rank: long lines of several ranks never interleave).
#include <ringtrain/ringtrain.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

constexpr int kInputs = 8, kHidden = 16, kSamples = 96;

struct Layer {  // out = W in + b; W is outputs x inputs
  int inputs, outputs;
  std::vector<float> w, b, gw, gb;
  Layer(int in, int out) : inputs(in), outputs(out), w(in * out), b(out), gw(in * out), gb(out) {}
};

// A fixed pseudo-random sequence, the same on every rank.
float noise(unsigned& state) {
  state = state * 1664525u + 1013904223u;
  return static_cast<float>(state >> 8) / static_cast<float>(1u << 24) - 0.5f;
}

// The whole data set: inputs, and labels from a fixed hyperplane.
void makeData(std::vector<float>& x, std::vector<float>& y) {
  unsigned state = 7;
  x.resize(kSamples * kInputs);
  y.resize(kSamples);
  for (int s = 0; s < kSamples; ++s) {
    float dot = 0;
    for (int i = 0; i < kInputs; ++i) {
      x[s * kInputs + i] = 4 * noise(state);
      dot += x[s * kInputs + i] * static_cast<float>(i % 3 - 1);
    }
    y[s] = dot > 0 ? 1.0f : 0.0f;
  }
}

// Forward and backward over samples [first, last): each gradient is `scale` times the sum over
// them (scale = 1 / their number: this rank's mean). Returns their summed loss.
float forwardBackward(Layer& l1, Layer& l2, const std::vector<float>& x,
                      const std::vector<float>& y, int first, int last, float scale) {
  for (Layer* l : {&l1, &l2}) {
    std::fill(l->gw.begin(), l->gw.end(), 0.0f);
    std::fill(l->gb.begin(), l->gb.end(), 0.0f);
  }
  float loss = 0;
  std::vector<float> h(kHidden);
  for (int s = first; s < last; ++s) {
    const float* in = &x[s * kInputs];
    for (int j = 0; j < kHidden; ++j) {
      float z = l1.b[j];
      for (int i = 0; i < kInputs; ++i)
        z += l1.w[j * kInputs + i] * in[i];
      h[j] = z > 0 ? z : 0;
    }
    float logit = l2.b[0];
    for (int j = 0; j < kHidden; ++j)
      logit += l2.w[j] * h[j];
    const float p = 1 / (1 + std::exp(-logit));
    loss -= y[s] > 0 ? std::log(p + 1e-7f) : std::log(1 - p + 1e-7f);
    const float d = (p - y[s]) * scale;  // dLoss/dlogit of the mean
    l2.gb[0] += d;
    for (int j = 0; j < kHidden; ++j) {
      l2.gw[j] += d * h[j];
      const float dh = h[j] > 0 ? d * l2.w[j] : 0;
      l1.gb[j] += dh;
      for (int i = 0; i < kInputs; ++i)
        l1.gw[j * kInputs + i] += dh * in[i];
    }
  }
  return loss;
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 200;
  try {
    ringtrain::start();  // mpirun's ranks; RINGTRAIN_* variables apply
    Layer l1(kInputs, kHidden), l2(kHidden, 1);
    unsigned state = 1u + static_cast<unsigned>(ringtrain::rank());  // differs: broadcast fixes it
    for (Layer* l : {&l1, &l2})
      for (float& v : l->w)
        v = noise(state);
    for (Layer* l : {&l1, &l2}) {
      ringtrain::broadcast(l->w.data(), l->w.size(), ringtrain::DataType::kFloat32, 0);
      ringtrain::broadcast(l->b.data(), l->b.size(), ringtrain::DataType::kFloat32, 0);
    }
    ringtrain::GradientExchange exchange;  // registered in backward's order
    const int gb2 = exchange.addParameter("fc2.bias", 1),
              gw2 = exchange.addParameter("fc2.weight", kHidden);
    const int gb1 = exchange.addParameter("fc1.bias", kHidden);
    const int gw1 = exchange.addParameter("fc1.weight", kHidden * kInputs);

    std::vector<float> x, y;
    makeData(x, y);
    const int share = kSamples / ringtrain::size(), first = ringtrain::rank() * share;
    float firstLoss = 0, loss = 0;
    for (int step = 0; step <= steps; ++step) {
      loss = forwardBackward(l1, l2, x, y, first, first + share, 1.0f / share);
      exchange.gradientReady(gb2, l2.gb.data());
      exchange.gradientReady(gw2, l2.gw.data());
      exchange.gradientReady(gb1, l1.gb.data());
      exchange.gradientReady(gw1, l1.gw.data());
      exchange.wait();
      // A named operation (Horovod's model): matched across ranks by its name.
      ringtrain::Operation lossSum;
      lossSum.name = "loss";
      lossSum.shape = {1};
      lossSum.input = lossSum.output = &loss;
      lossSum.op = ringtrain::ReduceOp::kSum;
      ringtrain::wait(ringtrain::submit(lossSum));
      loss /= kSamples;
      if (step == 0) firstLoss = loss;
      if (step == steps) break;  // the last pass only measures
      for (Layer* l : {&l1, &l2}) {
        for (std::size_t i = 0; i < l->w.size(); ++i)
          l->w[i] -= 0.5f * l->gw[i];
        for (std::size_t i = 0; i < l->b.size(); ++i)
          l->b[i] -= 0.5f * l->gb[i];
      }
    }
    std::FILE* out = stdout;
    if (argc > 2) {
      const std::string path = std::string(argv[2]) + "." + std::to_string(ringtrain::rank());
      out = std::fopen(path.c_str(), "w");
      if (out == nullptr) throw ringtrain::Error(path + ": cannot write");
    }
    std::fprintf(out, "rank %d/%d: loss %.6f -> %.6f; parameters", ringtrain::rank(),
                 ringtrain::size(), firstLoss, loss);
    for (Layer* l : {&l1, &l2}) {
      for (float v : l->w)
        std::fprintf(out, " %.9g", v);
      for (float v : l->b)
        std::fprintf(out, " %.9g", v);
    }
    std::fprintf(out, "\n");
    if (out != stdout) std::fclose(out);
    ringtrain::shutdown();
  } catch (const ringtrain::Error& e) {
    std::fprintf(stderr, "mlp_example: %s\n", e.what());
    return 2;
  }
  return 0;
}
