// product_perf: how fast one thread computes the float32 matrix products of the models, shape by
// shape, against the same products through the linked BLAS's cblas_sgemm and against the core's
// fused multiply-add peak, all measured in the same run.
//
//   build/bin/product_perf --models gpt2-124m,gpt-mini,cnn --json products.jsonl
//
// Each shape is what a layer multiplies in a training step (models/linear.cc,
// transformer_block.cc, transformer_kernels.cc, conv2d.cc): a dense layer's forward (y = W x),
// weight gradient (G = dy x^T) and input gradient (dx = W^T dy) with W row-major and the
// activations column-major (features x tokens), attention's six per-head products as plain
// matrices (the models read them from strided blocks), and the cnn's layers as the model builds
// them: each convolution's products of a chunk of the batch's lowered columns, as many a step as
// it has chunks. `ringtrain` is models::product(), the path every layer takes; `sgemm` is
// cblas_sgemm on operands of the same shapes and transposes. The peak is a loop of independent
// fused multiply-adds in the widest vectors the CPU has (AVX-512, else AVX2), chosen at run time;
// on an AVX-512 CPU, AVX2's peak is a row beside it. Per model, `step` weighs every shape by how
// often a step multiplies it. --peers adds other libraries' float32 GEMM on the same operands,
// loaded at run time (the build needs neither): `blis` (BLIS's serial CBLAS, Debian's
// libblis4-serial) and `onednn` (oneDNN's dnnl_sgemm, libdnnl2). Each figure is the median (and
// range) of --repeats rounds of at least --seconds each, rounds interleaved across the shapes and
// the ways. Prints a table; --json adds one JSON line per row.
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "base/comma_list.h"
#include "base/vector_dispatch.h"
#include "models/conv2d.h"
#include "models/linear.h"
#include "models/matrix_products.h"
#include "models/model_factory.h"
#include "models/tensor.h"
#include "options/option_table.h"
#include "src/bench/standalone_options.h"

#ifdef EIGEN_USE_BLAS
// The CBLAS declaration (no header of one BLAS build needed); the library is the one Eigen uses.
extern "C" void cblas_sgemm(int order, int transA, int transB, int m, int n, int k, float alpha,
                            const float* a, int lda, const float* b, int ldb, float beta, float* c,
                            int ldc);
#endif

namespace ringtrain {
namespace {

using models::Index;
using Clock = std::chrono::steady_clock;
using Matrix = models::Matrix<float>;
using RowMajor = models::RowMajorMatrix<float>;

// One product C[m x n] = op(A) op(B) of a model's step, `perStep` times a step.
struct Shape {
  std::string model, what;
  Index m = 0, n = 0, k = 0;
  bool transA = false, transB = false;  // column-major operands, as cblas sees them
  int perStep = 1;
};

// A dense layer of `in` -> `out` features over `tokens` columns, `count` of them in a step.
void addDense(std::vector<Shape>& shapes, const std::string& model, const std::string& name,
              Index in, Index out, Index tokens, int count) {
  // y = W x: W row-major [out x in] is column-major W^T; G = dy x^T; dx = W^T dy.
  shapes.push_back({model, name + " forward", out, tokens, in, true, false, count});
  shapes.push_back({model, name + " weight grad", in, out, tokens, false, true, count});
  shapes.push_back({model, name + " input grad", in, tokens, out, false, false, count});
}

void addGpt(std::vector<Shape>& shapes, const std::string& model, Index layers, Index heads,
            Index width, Index context, Index vocab, Index batch) {
  const Index tokens = context * batch, headSize = width / heads;
  const int perLayer = static_cast<int>(layers);
  addDense(shapes, model, "qkv", width, 3 * width, tokens, perLayer);
  addDense(shapes, model, "attn proj", width, width, tokens, perLayer);
  addDense(shapes, model, "mlp fc", width, 4 * width, tokens, perLayer);
  addDense(shapes, model, "mlp proj", 4 * width, width, tokens, perLayer);
  addDense(shapes, model, "lm head", width, vocab, tokens, 1);
  const int perHead = static_cast<int>(layers * heads * batch);
  // scores = K^T Q, out = V P; backward dV = dO P^T, dP = V^T dO, dQ = K dS, dK = Q dS^T.
  shapes.push_back({model, "attn scores", context, context, headSize, true, false, perHead});
  shapes.push_back({model, "attn values", headSize, context, context, false, false, perHead});
  shapes.push_back({model, "attn dV", headSize, context, context, false, true, perHead});
  shapes.push_back({model, "attn dP", context, context, headSize, true, false, perHead});
  shapes.push_back({model, "attn dQ", headSize, context, context, false, false, perHead});
  shapes.push_back({model, "attn dK", headSize, context, context, false, true, perHead});
}

double flopsOf(const Shape& s) {
  return 2.0 * double(s.m) * double(s.n) * double(s.k);
}

// A convolution's products as models/conv2d.cc makes them: its weights [out x field] times the
// lowered columns of one chunk of the batch at a time (Conv2d::chunkSamples), field-major for a
// channels-last input and tap-major (the K x N matrix row-major) for a channels-first one.
void addConv(std::vector<Shape>& shapes, const models::Conv2d<float>& layer, Index batch,
             bool inputGradient) {
  const Index out = layer.options().outChannels, field = layer.fieldSize();
  const bool tapMajor = layer.columnsAreTapMajor();
  const std::string& name = layer.name();
  const Index chunk = layer.chunkSamples(batch);
  for (auto [samples, count] :
       {std::pair{chunk, batch / chunk}, std::pair{batch % chunk, Index{1}}}) {
    if (samples == 0 || count == 0) continue;
    const Index fields = samples * layer.outputPixels();
    const int n = static_cast<int>(count);
    shapes.push_back({"cnn", name + " forward", out, fields, field, true, tapMajor, n});
    shapes.push_back({"cnn", name + " weight grad", field, out, fields, tapMajor, true, n});
    if (!inputGradient) continue;
    if (tapMajor)  // the columns' gradient row-major: its transpose dY^T W column-major
      shapes.push_back({"cnn", name + " input grad", fields, field, out, true, true, n});
    else
      shapes.push_back({"cnn", name + " input grad", field, fields, out, false, false, n});
  }
}

// The cnn's products, read off the model models/model_factory.cc builds: its convolutions and
// dense layers, without the first layer's input gradient, which a step does not compute. Prints
// their FLOPs a step beside the model's own count (Model::trainingFlopsPerSample), which they
// must equal.
void addCnn(std::vector<Shape>& shapes, Index batch) {
  const models::Model<float> model = models::makeModel<float>({.name = "cnn"});
  const std::size_t first = shapes.size();
  for (int i = 0; i < model.layerCount(); ++i) {
    const models::Layer<float>& layer = model.layer(i);
    if (const auto* conv = dynamic_cast<const models::Conv2d<float>*>(&layer))
      addConv(shapes, *conv, batch, /*inputGradient=*/i > 0);
    else if (dynamic_cast<const models::Linear<float>*>(&layer) != nullptr)
      addDense(shapes, "cnn", layer.name(), layer.inputShape().size(), layer.outputShape().size(),
               batch, 1);
  }
  double flops = 0;
  for (std::size_t i = first; i < shapes.size(); ++i)
    flops += flopsOf(shapes[i]) * shapes[i].perStep;
  fmt::print("# cnn: products of a step of {}: {:.6f} GFLOP; the model counts {:.6f}\n", batch,
             flops / 1e9, model.trainingFlopsPerSample() * static_cast<double>(batch) / 1e9);
  // A build with oneDNN convolves directly, without these products: say so beside the rows.
  const auto* conv = dynamic_cast<const models::Conv2d<float>*>(&model.layer(0));
  if (conv != nullptr && conv->isDirect())
    fmt::print(
        "# cnn: this build's convolutions are oneDNN's direct ones (RINGTRAIN_ONEDNN); the "
        "conv rows are im2col's products, the path without it\n");
}

// Seconds per call of `call`, over a round of at least `seconds`.
double secondsPerCall(const std::function<void()>& call, double seconds) {
  call();  // warm: first touches, packing buffers
  long calls = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  do {
    call();
    ++calls;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < seconds);
  return elapsed / double(calls);
}

// The operands of one shape, filled once.
struct Operands {
  Matrix a, b, c;
  explicit Operands(const Shape& s)
      : a(Matrix::Random(s.transA ? s.k : s.m, s.transA ? s.m : s.k)),
        b(Matrix::Random(s.transB ? s.n : s.k, s.transB ? s.k : s.n)),
        c(Matrix::Zero(s.m, s.n)) {}
};

// C = op(A) op(B) through models::product(), as the layers call it.
void ringtrainProduct(const Shape& s, Operands& o) {
  if (s.transA && s.transB) {
    models::product(o.c, o.a.transpose(), o.b.transpose());
  } else if (s.transA) {
    models::product(o.c, o.a.transpose(), o.b);
  } else if (s.transB) {
    models::product(o.c, o.a, o.b.transpose());
  } else {
    models::product(o.c, o.a, o.b);
  }
}

#ifdef EIGEN_USE_BLAS
void sgemmProduct(const Shape& s, Operands& o) {
  constexpr int kColMajor = 102, kNoTrans = 111, kTrans = 112;
  cblas_sgemm(kColMajor, s.transA ? kTrans : kNoTrans, s.transB ? kTrans : kNoTrans,
              static_cast<int>(s.m), static_cast<int>(s.n), static_cast<int>(s.k), 1.0f, o.a.data(),
              static_cast<int>(o.a.rows()), o.b.data(), static_cast<int>(o.b.rows()), 0.0f,
              o.c.data(), static_cast<int>(o.c.rows()));
}
#endif

// A way to compute a shape's product on its operands.
using ProductCall = std::function<void(const Shape&, Operands&)>;

enum class Peer { kBlis, kOneDnn };
struct PeerLibrary {
  Peer peer;
  const char* name;    // as --peers and the table call it
  const char* file;    // dlopen()'s name
  const char* symbol;  // its float32 GEMM
};
constexpr PeerLibrary kPeerLibraries[] = {
    {Peer::kBlis, "blis", "libblis.so.4", "cblas_sgemm"},
    {Peer::kOneDnn, "onednn", "libdnnl.so.2", "dnnl_sgemm"},
};

using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*,
                            int, float, float*, int);
using DnnlSgemm = int (*)(char, char, std::int64_t, std::int64_t, std::int64_t, float, const float*,
                          std::int64_t, const float*, std::int64_t, float, float*, std::int64_t);

// A peer threaded by OpenMP (oneDNN) would otherwise take every core whatever OMP_NUM_THREADS
// the caller left unset: holds it to one thread, as the table says, through the runtime it loaded.
// Returns the threads that runtime reports after that; 0 for a peer without OpenMP.
int keepPeerOnOneThread(void* handle) {
  using SetThreads = void (*)(int);
  using MaxThreads = int (*)();
  auto* set = reinterpret_cast<SetThreads>(dlsym(handle, "omp_set_num_threads"));
  auto* max = reinterpret_cast<MaxThreads>(dlsym(handle, "omp_get_max_threads"));
  if (set == nullptr || max == nullptr) return 0;
  set(1);
  return max();
}

// The peer's GEMM, or an error naming the library. RTLD_LOCAL and RTLD_DEEPBIND: BLIS exports the
// BLAS names too, and neither it nor OpenBLAS may take the other's calls.
ProductCall loadPeer(const PeerLibrary& library, std::string& error) {
  void* handle = dlopen(library.file, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  void* symbol = handle != nullptr ? dlsym(handle, library.symbol) : nullptr;
  if (symbol == nullptr) {
    error = fmt::format("--peers {}: cannot load {} from {}: {}", library.name, library.symbol,
                        library.file, dlerror());
    return {};
  }
  if (const int threads = keepPeerOnOneThread(handle); threads > 0)
    fmt::print("# {}: OpenMP threads: {}\n", library.name, threads);
  if (library.peer == Peer::kBlis) {
    auto* sgemm = reinterpret_cast<CblasSgemm>(symbol);
    return [sgemm](const Shape& s, Operands& o) {
      constexpr int kColMajor = 102, kNoTrans = 111, kTrans = 112;
      sgemm(kColMajor, s.transA ? kTrans : kNoTrans, s.transB ? kTrans : kNoTrans,
            static_cast<int>(s.m), static_cast<int>(s.n), static_cast<int>(s.k), 1.0f, o.a.data(),
            static_cast<int>(o.a.rows()), o.b.data(), static_cast<int>(o.b.rows()), 0.0f,
            o.c.data(), static_cast<int>(o.c.rows()));
    };
  }
  auto* sgemm = reinterpret_cast<DnnlSgemm>(symbol);
  return [sgemm](const Shape& s, Operands& o) {  // row-major: C^T = op(B)^T op(A)^T
    sgemm(s.transB ? 'T' : 'N', s.transA ? 'T' : 'N', s.n, s.m, s.k, 1.0f, o.b.data(), o.b.rows(),
          o.a.data(), o.a.rows(), 0.0f, o.c.data(), o.c.rows());
  };
}

// The FMA peak: 12 independent chains (enough to cover two FMA units' latency) of
// acc = acc * a + b in vectors of `lanes` floats, GFLOP/s over at least `seconds`. A macro, since
// each body must be compiled inside its own target function (lambdas and templates would be
// compiled for the baseline, where these intrinsics do not exist).
#if defined(__x86_64__) && defined(__GNUC__)
#define RINGTRAIN_FMA_PEAK_LOOP(Vector, lanes, set1, fmadd, store)         \
  constexpr int kChains = 12, kInner = 1 << 14;                            \
  Vector acc[kChains];                                                     \
  for (int c = 0; c < kChains; ++c)                                        \
    acc[c] = set1(1.0f + 0.001f * static_cast<float>(c));                  \
  const Vector a = set1(0.9999999f), b = set1(1e-7f);                      \
  long iterations = 0;                                                     \
  const auto start = Clock::now();                                         \
  double elapsed = 0;                                                      \
  do {                                                                     \
    for (int i = 0; i < kInner; ++i)                                       \
      for (int c = 0; c < kChains; ++c)                                    \
        acc[c] = fmadd(acc[c], a, b);                                      \
    iterations += kInner;                                                  \
    elapsed = std::chrono::duration<double>(Clock::now() - start).count(); \
  } while (elapsed < seconds);                                             \
  alignas(64) float lane[lanes];                                           \
  float keep = 0;                                                          \
  for (int c = 0; c < kChains; ++c) {                                      \
    store(lane, acc[c]);                                                   \
    for (float x : lane)                                                   \
      keep += x;                                                           \
  }                                                                        \
  volatile float sink = keep; /* the chains' results are used */           \
  (void)sink;                                                              \
  return 2.0 * (lanes)*kChains * double(iterations) / elapsed / 1e9;

__attribute__((target("avx512f"))) double peakAvx512(double seconds) {
  RINGTRAIN_FMA_PEAK_LOOP(__m512, 16, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_store_ps)
}

__attribute__((target("avx2,fma"))) double peakAvx2(double seconds) {
  RINGTRAIN_FMA_PEAK_LOOP(__m256, 8, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_store_ps)
}
#undef RINGTRAIN_FMA_PEAK_LOOP
#endif

// One round's FMA peaks: the widest vectors this CPU has ("avx512", "avx2" or "none", GFLOP/s 0),
// and AVX2's beside, so that a table shows what the wider vectors add (on a core that splits a
// 512-bit FMA in two halves, nothing). Where AVX2 is the widest, both are the same measurement.
struct FmaPeak {
  std::string isa = "none";
  double widest = 0;
  double avx2 = 0;
};

FmaPeak fmaPeak(double seconds) {
  FmaPeak peak;
#if defined(__x86_64__) && defined(__GNUC__)
  if (base::cpuHas(base::CpuFeature::kAvx2) && base::cpuHas(base::CpuFeature::kFma)) {
    peak.isa = "avx2";
    peak.widest = peak.avx2 = peakAvx2(seconds);
  }
  if (base::cpuHas(base::CpuFeature::kAvx512f)) {
    peak.isa = "avx512";
    peak.widest = peakAvx512(seconds);
  }
#endif
  (void)seconds;
  return peak;
}

struct Options {
  std::vector<std::string> models{"gpt2-124m", "gpt-mini", "cnn"};
  // 1024 tokens a step for either GPT; the cnn's batch of model_speed.sh.
  Index gpt2Batch = 1, miniBatch = 8, cnnBatch = 64;
  std::vector<PeerLibrary> peers;
  double seconds = 0.3;
  int repeats = 3;
  std::string json;
};

// What the table reads: the options, and --models as typed (read after parsing).
struct Parsed {
  Options o;
  std::string models = "gpt2-124m,gpt-mini,cnn";
  std::string peers;
};

const options::Table<Parsed>& optionTable() {
  constexpr options::Range kAny = options::kAny;  // judged after reading, in parseOptions's words
  // clang-format off
  static const options::Table<Parsed> table = bench::inGroup<Parsed>("product_perf options", {
      options::text<Parsed>("models", RINGTRAIN_FIELD(models), "comma-separated: gpt2-124m, gpt-mini, cnn"),
      options::number<Parsed>("gpt2-124m-batch", RINGTRAIN_FIELD(o.gpt2Batch), kAny, "gpt2-124m: sequences of 1024 tokens per step"),
      options::number<Parsed>("gpt-mini-batch", RINGTRAIN_FIELD(o.miniBatch), kAny, "gpt-mini: sequences of 128 tokens per step"),
      options::number<Parsed>("cnn-batch", RINGTRAIN_FIELD(o.cnnBatch), kAny, "cnn images per step"),
      options::text<Parsed>("peers", RINGTRAIN_FIELD(peers), "comma-separated, loaded at run time: blis, onednn"),
      options::number<Parsed>("seconds", RINGTRAIN_FIELD(o.seconds), kAny, "least time per figure"),
      options::number<Parsed>("repeats", RINGTRAIN_FIELD(o.repeats), kAny, "rounds"),
      options::text<Parsed>("json", RINGTRAIN_FIELD(o.json), "also write each row as a JSON line to this file"),
  });
  // clang-format on
  return table;
}

// Returns 0 to go on, else the exit status (2: a bad option, named; 0 after --help: -1).
int parseOptions(int argc, char** argv, Options& o) {
  const options::Program program{"product_perf", "usage: product_perf [options]"};
  Parsed parsed;
  bool help = false;
  if (auto error = bench::parseStandalone(program, optionTable(), argc, argv, parsed, help)) {
    std::fprintf(stderr, "product_perf: %s\n", error->c_str());
    return 2;
  }
  if (help) return -1;
  o = parsed.o;
  o.models = base::commaSeparated(parsed.models);
  for (const std::string& m : o.models) {
    if (m != "gpt2-124m" && m != "gpt-mini" && m != "cnn") {
      std::fprintf(stderr, "product_perf: --models: no model '%s' (gpt2-124m, gpt-mini, cnn)\n",
                   m.c_str());
      return 2;
    }
  }
  for (const std::string& name : base::commaSeparated(parsed.peers)) {
    const auto* library = std::find_if(std::begin(kPeerLibraries), std::end(kPeerLibraries),
                                       [&](const PeerLibrary& l) { return name == l.name; });
    if (library == std::end(kPeerLibraries)) {
      std::fprintf(stderr, "product_perf: --peers: no library '%s' (blis, onednn)\n", name.c_str());
      return 2;
    }
    o.peers.push_back(*library);
  }
  if (o.models.empty() || o.gpt2Batch < 1 || o.miniBatch < 1 || o.cnnBatch < 1 || o.repeats < 1 ||
      o.seconds <= 0) {
    std::fprintf(stderr,
                 "product_perf: --models needs a model; the batches, --repeats and --seconds must "
                 "be positive\n");
    return 2;
  }
  return 0;
}

std::vector<Shape> shapesOf(const Options& o) {
  std::vector<Shape> shapes;
  for (const std::string& m : o.models) {
    if (m == "gpt2-124m") addGpt(shapes, m, 12, 12, 768, 1024, 50257, o.gpt2Batch);
    if (m == "gpt-mini") addGpt(shapes, m, 4, 4, 256, 128, 50257, o.miniBatch);
    if (m == "cnn") addCnn(shapes, o.cnnBatch);
  }
  return shapes;
}

struct Spread {
  double median = 0, min = 0, max = 0;
};
Spread spreadOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return {};
  return {v[v.size() / 2], v.front(), v.back()};
}

// One way of computing the products, and its seconds per call [shape][round].
struct Way {
  std::string name;  // the table's and the JSON's: ringtrain, sgemm, blis, onednn
  ProductCall call;  // empty: not measured (sgemm without a linked BLAS)
  std::vector<std::vector<double>> seconds;
};

// ringtrain, the linked BLAS's sgemm, then the --peers; an error where a peer does not load.
std::vector<Way> waysOf(const Options& o, std::string& error) {
  std::vector<Way> ways{{"ringtrain", ringtrainProduct, {}}, {"sgemm", {}, {}}};
#ifdef EIGEN_USE_BLAS
  ways[1].call = sgemmProduct;
#endif
  for (const PeerLibrary& library : o.peers) {
    ways.push_back({library.name, loadPeer(library, error), {}});
    if (!error.empty()) return {};
  }
  return ways;
}

struct Peak {
  std::vector<double> gflops;  // [round], the widest vectors'
  std::vector<double> avx2;    // [round]
  std::string isa;
};

Peak measure(const std::vector<Shape>& shapes, std::vector<Way>& ways, const Options& o) {
  Peak peak;
  for (Way& way : ways)
    way.seconds.resize(way.call ? shapes.size() : 0);
  for (int round = 0; round < o.repeats; ++round) {
    const FmaPeak now = fmaPeak(o.seconds);
    peak.isa = now.isa;
    peak.gflops.push_back(now.widest);
    peak.avx2.push_back(now.avx2);
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      Operands operands(shapes[i]);
      for (Way& way : ways) {
        if (way.call)
          way.seconds[i].push_back(
              secondsPerCall([&] { way.call(shapes[i], operands); }, o.seconds));
      }
    }
  }
  return peak;
}

std::string cell(const Spread& s) {
  return fmt::format("{:.1f} ({:.1f}-{:.1f})", s.median, s.min, s.max);
}

// GFLOP/s of each round: `flops` over the rounds' seconds.
std::vector<double> rates(double flops, const std::vector<double>& seconds) {
  std::vector<double> r;
  for (double s : seconds)
    r.push_back(flops / s / 1e9);
  return r;
}

// A model's step: every shape's seconds a round, weighed by how often a step multiplies it.
std::vector<double> stepSeconds(const std::vector<Shape>& shapes,
                                const std::vector<std::size_t>& of, const Way& way, int repeats) {
  std::vector<double> seconds(static_cast<std::size_t>(repeats));
  for (std::size_t i : of)
    for (std::size_t r = 0; r < seconds.size(); ++r)
      seconds[r] += way.seconds[i][r] * shapes[i].perStep;
  return seconds;
}

// Prints one row of the table and its JSON line: a figure per way (0 where not measured).
class Rows {
 public:
  Rows(const std::vector<Way>& ways, const Peak& peak, const std::string& json)
      : ways_(ways),
        peak_(peak),
        median_(spreadOf(peak.gflops).median),
        avx2Median_(spreadOf(peak.avx2).median) {
    if (!json.empty()) json_.open(json);
    fmt::print("| model | product | m x n x k | per step | ringtrain GFLOP/s | of peak |");
    for (std::size_t w = 1; w < ways.size(); ++w)
      fmt::print(" {} GFLOP/s |", ways[w].name);
    fmt::print("\n|---|---|---|---:|---:|---:|");
    for (std::size_t w = 1; w < ways.size(); ++w)
      fmt::print("---:|");
    fmt::print("\n");
  }

  // `seconds(way)`: that way's seconds a round for this row.
  void add(const std::string& model, const std::string& what, const std::string& dims, int perStep,
           double flops, const std::function<std::vector<double>(const Way&)>& seconds) {
    std::string cells, fields;
    double ours = 0;
    for (const Way& way : ways_) {
      const Spread s = way.call ? spreadOf(rates(flops, seconds(way))) : Spread{};
      if (&way == &ways_.front()) {
        ours = s.median;
        cells += fmt::format(" {} | {:.0f}% |", cell(s), median_ > 0 ? 100 * ours / median_ : 0.0);
      } else {
        cells += way.call ? fmt::format(" {} |", cell(s)) : std::string(" - |");
      }
      fields += fmt::format("\"{}_gflops\": {:.3f}, ", way.name, s.median);
    }
    fmt::print("| {} | {} | {} | {} |{}\n", model, what, dims, perStep, cells);
    if (json_.is_open())
      json_ << fmt::format(
          "{{\"model\": \"{}\", \"product\": \"{}\", \"shape\": \"{}\", \"per_step\": {}, "
          "{}\"peak_gflops\": {:.3f}, \"peak_isa\": \"{}\", \"peak_avx2_gflops\": {:.3f}}}\n",
          model, what, dims, perStep, fields, median_, peak_.isa, avx2Median_);
  }

 private:
  const std::vector<Way>& ways_;
  const Peak& peak_;
  double median_;
  double avx2Median_;
  std::ofstream json_;
};

void report(const std::vector<Shape>& shapes, const std::vector<Way>& ways, const Peak& peak,
            const Options& o) {
  Rows rows(ways, peak, o.json);
  std::map<std::string, std::vector<std::size_t>> byModel;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const Shape& s = shapes[i];
    rows.add(s.model, s.what, fmt::format("{} x {} x {}", s.m, s.n, s.k), s.perStep, flopsOf(s),
             [&](const Way& way) { return way.seconds[i]; });
    byModel[s.model].push_back(i);
  }
  for (const std::string& model : o.models) {
    double flops = 0;
    for (std::size_t i : byModel[model])
      flops += flopsOf(shapes[i]) * shapes[i].perStep;
    rows.add(model, "step (all products)", fmt::format("{:.1f} GFLOP", flops / 1e9), 1, flops,
             [&](const Way& way) { return stepSeconds(shapes, byModel[model], way, o.repeats); });
  }
  std::string empty;
  for (std::size_t w = 1; w < ways.size(); ++w)
    empty += " |";
  const Spread widest = spreadOf(peak.gflops);
  fmt::print("| FMA peak, one core | {} | | | {} | 100% |{}\n", peak.isa, cell(widest), empty);
  if (peak.isa == "avx512") {
    const Spread avx2 = spreadOf(peak.avx2);
    fmt::print("| FMA peak, one core | avx2 | | | {} | {:.0f}% |{}\n", cell(avx2),
               widest.median > 0 ? 100 * avx2.median / widest.median : 0.0, empty);
  }
}

}  // namespace
}  // namespace ringtrain

int main(int argc, char** argv) {
  using namespace ringtrain;
  Options o;
  if (const int status = parseOptions(argc, argv, o); status != 0) return status < 0 ? 0 : status;
  models::keepMatrixProductsOnOneThread();
  fmt::print(
      "# product_perf: one thread, products by {}; median (range) of {} rounds of at least "
      "{} s a figure\n",
      models::matrixProducts().name, o.repeats, o.seconds);
  std::string error;
  std::vector<Way> ways = waysOf(o, error);
  if (!error.empty()) {
    std::fprintf(stderr, "product_perf: %s\n", error.c_str());
    return 2;
  }
  const std::vector<Shape> shapes = shapesOf(o);
  const Peak peak = measure(shapes, ways, o);
  report(shapes, ways, peak, o);
  return 0;
}
