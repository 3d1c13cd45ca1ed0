// The GPU check (scripts/gpu/NOTES.md says how a GPU window runs it): every (op, dtype)
// the CUDA kernels claim, against the oracle and against the CPU, twice for
// determinism, at the op table's small shapes and at the shapes of real models, with
// the time of each on both devices, and every family's training and inference (tfm's
// fixtures and Hugging Face's) against the CPU's. Each stage is one invocation, so a crash or a hang
// in one leaves the others' rows; rows go to stdout as tab-separated lines starting
// with "ROW", which scripts/gpu/run.sh gathers into one table.
//
//   tfm_gpu_check --stage env|memory|ops|large|train|infer [--device cuda|sim|cpu] [--fixtures DIR] [--hf-fixtures DIR]
//   tfm_gpu_check --dry-run     every check of every stage, run nowhere (CI)
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <functional>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <omp.h>

#include "autograd/autograd.h"
#include "ops/attention.h"
#include "ops/convert.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/layer_norm.h"
#include "ops/loss.h"
#include "ops/matmul.h"
#include "ops/optimizer.h"
#include "ops/reduce.h"
#include "ops/rotary.h"
#include "ops/shape.h"
#include "ops/softmax.h"
#include "data/idx.h"
#include "io/safetensors.h"
#include "models/encoder_decoder.h"
#include "support/datasets.h"
#include "support/op_cases.h"
#include "tensor/error.h"
#include "tensor/rng.h"
#include "tensor/strided.h"
#include "tfm/classifier.h"
#include "tfm/encoder.h"
#include "tfm/generator.h"
#include "tfm/images.h"
#include "tfm/training.h"
#include "tfm/translator.h"
#include "train/copy_task.h"
#include "train/seq2seq.h"

namespace tfm {
namespace {

using op_cases::Values;

bool g_dry_run = false;
Device g_device = Device::CUDA;

// One line of the final table.
struct Row {
  std::string stage, check, dtype, shape;
  double error = 0.0, tolerance = 0.0;
  std::string deterministic = "-";
  double device_ms = 0.0, cpu_ms = 0.0;
  std::string result;
};

void print(const Row& r) {
  std::printf("ROW\t%s\t%s\t%s\t%s\t%.2e\t%.0e\t%s\t%.3f\t%.3f\t%s\n", r.stage.c_str(), r.check.c_str(), r.dtype.c_str(), r.shape.c_str(),
              r.error, r.tolerance, r.deterministic.c_str(), r.device_ms, r.cpu_ms, r.result.c_str());
  std::fflush(stdout);
}

// Runs `check` (which fills the row) unless this is a dry run; an exception fails the row.
void run(Row row, const std::function<void(Row&)>& check) {
  if (g_dry_run) {
    row.result = "listed";
    return print(row);
  }
  try {
    check(row);
    if (row.result.empty()) row.result = row.error <= row.tolerance && row.deterministic != "no" ? "pass" : "FAIL";
  } catch (const std::exception& e) {
    row.result = std::string("FAIL: ") + e.what();
    for (char& c : row.result)
      if (c == '\t' || c == '\n') c = ' ';
  }
  print(row);
}

double now_ms() { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Waits for the device's queued work (a one-element read back).
void sync(const Tensor& t) {
  if (t.numel() > 0) (void)make_view(t, {}, {}, t.impl()->offset).item();
}

bool bitwise_equal(const Values& a, const Values& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(double)) != 0) return false;
  return true;
}

// ||a - b|| / ||b||, NaN anywhere is infinite.
double relative_error(const Values& a, const Values& b) {
  if (a.size() != b.size()) return INFINITY;
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) && !(a[i] == b[i])) return INFINITY;
    if (std::isfinite(b[i])) num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
  }
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

std::string shape_of(const std::vector<op_cases::Input>& inputs) {
  std::string s;
  for (const auto& in : inputs) s += (s.empty() ? "" : " ") + shape_str(in.shape);
  for (char& c : s)
    if (c == ' ') c = '_';
  return s;
}

// Uniform [-scale, scale) f32 values from a seed, on `device`.
Tensor random(const Shape& shape, uint64_t seed, Device device, float scale = 1.0f) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * (2.0f * hash_uniform(seed, i) - 1.0f);
  return ops::to(Tensor::from_vector(shape, v), device);
}

// --- stage env ---

void stage_env() {
  run({"env", "device", "-", "-"}, [](Row& r) {
    r.check = ops::kernels(g_device).describe();
    r.result = "pass";
  });
}

// --- stage memory: tensor/'s copies, walks and fills against the CPU ---

void stage_memory() {
  for (DType t : {DType::f32, DType::bf16, DType::i64, DType::i32, DType::u8, DType::boolean}) {
    run({"memory", "round trip", to_string(t), "[3, 1000]"}, [t](Row& r) {
      std::vector<float> v(3000);
      for (int i = 0; i < 3000; ++i) v[i] = static_cast<float>((i * 37) % 251) - 100.0f;
      const Tensor host = ops::to(Tensor::from_vector({3, 1000}, v), t);
      const Tensor back = ops::to(ops::to(host, g_device), Device::CPU);
      r.error = std::memcmp(back.device_ptr(), host.device_ptr(), 3000 * size_of(t)) == 0 ? 0.0 : 1.0;
    });
  }
  run({"memory", "strided copy of a transposed view", "f32", "[64, 48]^T"}, [](Row& r) {
    const Tensor filled = random({64, 48}, 3, Device::CPU);
    const Tensor on_device = ops::to(filled, g_device);
    const Tensor t = ops::transpose(on_device, 0, 1).clone();  // a strided walk on the device
    r.error = relative_error(op_cases::values_of(t), op_cases::values_of(ops::transpose(filled, 0, 1).clone()));
  });
  run({"memory", "fill and strided add", "f32", "[1000]"}, [](Row& r) {
    Tensor a = Tensor::full({1000}, 1.5f, g_device);
    const Tensor b = ops::to(Tensor::full({2000}, 0.25f), g_device);
    Tensor view = make_view(a, {500}, {2}, 0);
    strided_add(make_view(b, {500}, {4}, 1), view);
    const Values got = op_cases::values_of(a);
    for (size_t i = 0; i < got.size(); ++i) r.error = std::max(r.error, std::fabs(got[i] - (i % 2 == 0 ? 1.75 : 1.5)));
  });
  // Each path of strided_add and fill (tensor/cuda/memory.cu): a zero fill (a memset),
  // contiguous adds four at a time with a tail, one off 16 bytes, a permuted 3-d walk.
  run({"memory", "zero fill; contiguous, unaligned and permuted adds", "f32", "[7, 11, 13]"}, [](Row& r) {
    auto apply = [](Device d) {
      Tensor acc = Tensor::full({1001}, 3.0f, d);
      acc.fill(0.0f);
      const Tensor x = random({1001}, 5, d);
      strided_add(x, acc);  // 250 quads and a tail of 1
      Tensor tail = make_view(acc, {1000}, {1}, 1);
      strided_add(make_view(x, {1000}, {1}, 0), tail);  // 4 bytes off 16
      Tensor cube = random({7, 11, 13}, 6, d);
      strided_add(ops::permute(random({13, 7, 11}, 7, d), {1, 2, 0}), cube);
      Values v = op_cases::values_of(acc), c = op_cases::values_of(cube);
      v.insert(v.end(), c.begin(), c.end());
      return v;
    };
    const Values got = apply(g_device), want = apply(Device::CPU);
    r.error = bitwise_equal(got, want) ? 0.0 : std::max(relative_error(got, want), 1.0);
  });
}

// --- stage ops: the op table's cases ---

void compare_runs(Row& r, const std::function<std::vector<Values>()>& on_device, const std::function<std::vector<Values>()>& on_cpu) {
  const double t0 = now_ms();
  const std::vector<Values> first = on_device();
  r.device_ms = now_ms() - t0;
  const std::vector<Values> second = on_device();
  bool same = first.size() == second.size();
  for (size_t i = 0; same && i < first.size(); ++i) same = bitwise_equal(first[i], second[i]);
  r.deterministic = same ? "yes" : "no";
  const double t1 = now_ms();
  const std::vector<Values> cpu = on_cpu();
  r.cpu_ms = now_ms() - t1;
  for (size_t i = 0; i < first.size() && i < cpu.size(); ++i) r.error = std::max(r.error, relative_error(first[i], cpu[i]));
}

void stage_ops() {
  const std::vector<op_cases::OpCase> all = op_cases::cases();
  const std::vector<ops::Claim> claims = g_dry_run ? ops::kernels(Device::CPU).claims : ops::kernels(g_device).claims;
  for (const ops::Claim& claim : claims)
    for (const op_cases::OpCase& c : all) {
      if (c.op != claim.op) continue;
      const std::string shape = shape_of(c.inputs);
      // Against the oracle (the op table's tolerance), then against the CPU, twice.
      run({"ops", c.op + " forward", to_string(claim.dtype), shape}, [&](Row& r) {
        const op_cases::Outcome o = op_cases::run_forward(c, g_device, claim.dtype);
        r.tolerance = op_cases::forward_tolerance(claim.dtype);
        Row vs_cpu = r;
        compare_runs(vs_cpu, [&] { return std::vector<Values>{op_cases::run_forward(c, g_device, claim.dtype).got}; },
                     [&] { return std::vector<Values>{op_cases::run_forward(c, Device::CPU, claim.dtype).got}; });
        r.error = std::max(o.error, vs_cpu.error);
        r.deterministic = vs_cpu.deterministic;
        r.device_ms = vs_cpu.device_ms, r.cpu_ms = vs_cpu.cpu_ms;
      });
      if (!op_cases::has_backward(c, claim.dtype)) continue;
      run({"ops", c.op + " backward", to_string(claim.dtype), shape}, [&](Row& r) {
        r.tolerance = op_cases::backward_tolerance(claim.dtype);
        for (const op_cases::Outcome& o : op_cases::run_backward(c, g_device, claim.dtype)) r.error = std::max(r.error, o.error);
        auto grads = [&](Device d) {
          std::vector<Values> out;
          for (const op_cases::Outcome& o : op_cases::run_backward(c, d, claim.dtype)) out.push_back(o.got);
          return out;
        };
        Row vs_cpu = r;
        compare_runs(vs_cpu, [&] { return grads(g_device); }, [&] { return grads(Device::CPU); });
        r.error = std::max(r.error, vs_cpu.error);
        r.deterministic = vs_cpu.deterministic;
        r.device_ms = vs_cpu.device_ms, r.cpu_ms = vs_cpu.cpu_ms;
      });
    }
}

// --- stage large: the shapes of real models, the CPU as the reference ---

// A large case: its inputs (made by `inputs` on a device), its function, and whether
// its backward is checked (the gradients of sum(out * g) for every f32 input).
struct LargeCase {
  std::string name, dtype, shape;
  std::function<std::vector<Tensor>(Device)> inputs;
  std::function<Tensor(const std::vector<Tensor>&)> fn;
  bool backward = true;
  double tolerance = 1e-5;
};

// The case's result (and gradients) on `device`, and the time of one call there.
std::vector<Values> evaluate(const LargeCase& c, Device device, double* ms) {
  std::vector<Tensor> x = c.inputs(device);
  if (c.backward)
    for (Tensor& t : x)
      if (t.dtype() == DType::f32) t.set_requires_grad(true);
  Tensor g;  // the gradient of the result: made once, outside the timed calls
  auto once = [&] {
    Tensor out = c.fn(x);
    if (c.backward) {
      if (!g.defined()) g = random(out.shape(), 999, device);
      for (Tensor& t : x) t.zero_grad();
      autograd::backward(ops::sum(ops::mul(out, g)));
    }
    return out;
  };
  sync(once());  // warm: handles, workspaces, the allocator's pool
  const int reps = device == Device::CPU ? 1 : 5;
  const double t0 = now_ms();
  Tensor out;
  for (int i = 0; i < reps; ++i) out = once();
  for (const Tensor& t : x)
    if (t.grad().defined()) sync(t.grad());
  sync(out);
  *ms = (now_ms() - t0) / reps;
  std::vector<Values> values{op_cases::values_of(out)};
  for (const Tensor& t : x)
    if (t.grad().defined()) values.push_back(op_cases::values_of(t.grad()));
  return values;
}

std::vector<LargeCase> large_cases() {
  using V = std::vector<Tensor>;
  static const ops::LinearProducts bf16(ops::Precision::bf16);
  std::vector<LargeCase> c;
  // base Transformer's feed-forward and projections: 4096 tokens, 512 -> 2048
  c.push_back({"linear", "f32", "[4096,512]x[2048,512]", [](Device d) { return V{random({4096, 512}, 1, d), random({2048, 512}, 2, d, 0.05f), random({2048}, 3, d)}; },
               [](const V& x) { return ops::linear(x[0], x[1], x[2], ops::LinearProducts::f32()); }});
  // An output within rounding of 0 can fall on the other side of the ReLU on the other
  // device, flipping its row of the gradient: 7.7e-5 of dw's norm on an H200 (window 1).
  c.push_back({"linear_relu", "f32", "[4096,512]x[2048,512]", [](Device d) { return V{random({4096, 512}, 4, d), random({2048, 512}, 5, d, 0.05f), random({2048}, 6, d)}; },
               [](const V& x) { return ops::linear_relu(x[0], x[1], x[2], ops::LinearProducts::f32()); }, true, 2e-4});
  c.push_back({"linear", "bf16", "[4096,512]x[2048,512]", [](Device d) { return V{random({4096, 512}, 7, d), random({2048, 512}, 8, d, 0.05f), random({2048}, 9, d)}; },
               [](const V& x) { return ops::linear(x[0], x[1], x[2], bf16); }, true, 1e-2});
  c.push_back({"matmul", "f32", "[64,128,64]x[64,64,128]", [](Device d) { return V{random({64, 128, 64}, 10, d), random({64, 64, 128}, 11, d)}; },
               [](const V& x) { return ops::matmul(x[0], x[1]); }});
  // attention of a batch of 32 sentences of 40 tokens, 8 heads of 64, padding and causal
  auto qkv = [](Device d) { return V{random({32, 40, 512}, 12, d), random({32, 40, 512}, 13, d), random({32, 40, 512}, 14, d)}; };
  c.push_back({"attention padded", "f32", "[32,40,8x64]", qkv, [](const V& x) {
                 std::vector<uint8_t> pad(32 * 40);
                 for (int b = 0; b < 32; ++b)
                   for (int j = 40 - b % 7; j < 40; ++j) pad[b * 40 + j] = 1;
                 ops::AttentionMask m;
                 m.key_padding = ops::to(ops::to(Tensor::from_values<uint8_t>({32, 40}, pad), DType::boolean), x[0].device());
                 return ops::attention(x[0], x[1], x[2], 8, m);
               }});
  c.push_back({"attention causal+dropout", "f32", "[32,40,8x64]", qkv, [](const V& x) {
                 ops::AttentionMask m;
                 m.causal = true;
                 return ops::attention(x[0], x[1], x[2], 8, m, 0.1f, DropoutKey(42));
               }});
  // A Llama-shaped layer's pieces: grouped-query attention (8 query heads over 2 K/V
  // heads of 64, causal, 300 tokens: ten tiles), rotary embeddings of the queries (a slice
  // of the fused projection, llama3 frequencies), RMS norm.
  c.push_back({"attention grouped-query causal", "f32", "[4,300,8x64]->[4,300,2x64]",
               [](Device d) { return V{random({4, 300, 512}, 49, d), random({4, 300, 128}, 50, d), random({4, 300, 128}, 51, d)}; },
               [](const V& x) {
                 ops::AttentionMask m;
                 m.causal = true;
                 return ops::attention(x[0], x[1], x[2], {8, 2}, m);
               }});
  c.push_back({"rotary llama3", "f32", "[4,300,8x64] of [4,300,768]", [](Device d) { return V{random({4, 300, 768}, 52, d)}; },
               [](const V& x) {
                 ops::Rope rope;
                 rope.theta = 500000.0, rope.scaling = {"llama3", 8.0, 1.0, 4.0, 8192};
                 const Tensor positions = ops::reshape(ops::arange(1000, 1300, x[0].device()), {1, 300});
                 return ops::rotary(ops::slice(x[0], 2, 0, 512), positions, ops::to(ops::rotary_frequencies(64, rope), x[0].device()),
                                    ops::RotaryLayout::half);
               }});
  c.push_back({"rms_norm", "f32", "[8192,512]", [](Device d) { return V{random({8192, 512}, 53, d, 3.0f), random({512}, 54, d)}; },
               [](const V& x) { return ops::rms_norm(x[0], x[1]); }});
  // Heads of 20 values (the tile functions' columns past the width), 70 queries (three
  // tiles) to 45 padded keys (two), with dropout.
  c.push_back({"attention 3 heads of 20", "f32", "[16,70,3x20]->[16,45,3x20]",
               [](Device d) { return V{random({16, 70, 60}, 38, d), random({16, 45, 60}, 39, d), random({16, 45, 60}, 40, d)}; },
               [](const V& x) {
                 std::vector<uint8_t> pad(16 * 45);
                 for (int b = 0; b < 16; ++b)
                   for (int j = 45 - 3 * b; j < 45; ++j) pad[b * 45 + j] = 1;
                 ops::AttentionMask m;
                 m.key_padding = ops::to(ops::to(Tensor::from_values<uint8_t>({16, 45}, pad), DType::boolean), x[0].device());
                 return ops::attention(x[0], x[1], x[2], 3, m, 0.1f, DropoutKey(47));
               }});
  // The flash kernels' block sizes by head width: GPT-2's context of 1,024 (sixteen tiles
  // of 64 keys, causal); heads of 128 (the keys' gradients in blocks of two warps); of 320
  // (the forward in blocks of one warp, the backward on the CUDA cores); of 512 (all of it
  // on the CUDA cores).
  c.push_back({"attention context 1024 causal", "f32", "[2,1024,4x64]",
               [](Device d) { return V{random({2, 1024, 256}, 55, d), random({2, 1024, 256}, 56, d), random({2, 1024, 256}, 57, d)}; },
               [](const V& x) {
                 ops::AttentionMask m;
                 m.causal = true;
                 return ops::attention(x[0], x[1], x[2], 4, m, 0.1f, DropoutKey(49));
               }});
  for (const int64_t width : {128, 320, 512}) {
    const int64_t heads = width == 128 ? 4 : 2, kv = width == 128 ? 2 : heads;
    c.push_back({"attention heads of " + std::to_string(width), "f32",
                 "[4,90," + std::to_string(heads) + "x" + std::to_string(width) + "]->[4,90," + std::to_string(kv) + "x" + std::to_string(width) + "]",
                 [=](Device d) { return V{random({4, 90, heads * width}, 58, d), random({4, 90, kv * width}, 59, d), random({4, 90, kv * width}, 60, d)}; },
                 [=](const V& x) {
                   std::vector<uint8_t> pad(4 * 90);
                   for (int b = 0; b < 4; ++b)
                     for (int j = 90 - 11 * b; j < 90; ++j) pad[b * 90 + j] = 1;
                   ops::AttentionMask m;
                   m.key_padding = ops::to(ops::to(Tensor::from_values<uint8_t>({4, 90}, pad), DType::boolean), x[0].device());
                   m.causal = width == 128;
                   return ops::attention(x[0], x[1], x[2], {heads, kv}, m, 0.1f, DropoutKey(50));
                 }});
  }
  // 1,000 keys: the kernels keep the scores in probs rather than in shared memory.
  c.push_back({"attention to 1000 keys", "f32", "[4,40,8x64]->[4,1000,8x64]",
               [](Device d) { return V{random({4, 40, 512}, 41, d), random({4, 1000, 512}, 42, d), random({4, 1000, 512}, 43, d)}; },
               [](const V& x) {
                 std::vector<uint8_t> pad(4 * 1000);
                 for (int j = 900; j < 1000; ++j) pad[j] = 1;
                 ops::AttentionMask m;
                 m.key_padding = ops::to(ops::to(Tensor::from_values<uint8_t>({4, 1000}, pad), DType::boolean), x[0].device());
                 return ops::attention(x[0], x[1], x[2], 8, m, 0.1f, DropoutKey(48));
               }});
  // Training's encoder: 32 sentences of 1 to 40 tokens packed without padding, attending
  // within their own sentence (with dropout), and the decoder's queries attending to them.
  auto packed = std::make_shared<ops::PackedSequences>();
  for (int64_t b = 0, rows = 0; b < 32; ++b) {
    packed->start.push_back(rows), packed->length.push_back(1 + static_cast<int64_t>(splitmix64(b) % 40));
    rows += packed->length.back();
  }
  const int64_t rows = packed->start.back() + packed->length.back();
  c.push_back({"attention packed+dropout", "f32", "[1," + std::to_string(rows) + ",8x64]",
               [rows](Device d) { return V{random({1, rows, 512}, 30, d), random({1, rows, 512}, 31, d), random({1, rows, 512}, 32, d)}; },
               [packed](const V& x) {
                 ops::AttentionMask m;
                 m.packed_queries = m.packed_keys = packed;
                 return ops::attention(x[0], x[1], x[2], 8, m, 0.1f, DropoutKey(43, 5));
               }});
  c.push_back({"attention to packed keys", "f32", "[32,30,8x64]->[1," + std::to_string(rows) + ",8x64]",
               [rows](Device d) { return V{random({32, 30, 512}, 33, d), random({1, rows, 512}, 34, d), random({1, rows, 512}, 35, d)}; },
               [packed](const V& x) {
                 ops::AttentionMask m;
                 m.packed_keys = packed;
                 return ops::attention(x[0], x[1], x[2], 8, m, 0.1f, DropoutKey(44));
               }});
  c.push_back({"dropout packed", "f32", "[1," + std::to_string(rows) + ",512]", [rows](Device d) { return V{random({1, rows, 512}, 36, d)}; },
               [packed](const V& x) { return ops::dropout(x[0], 0.1f, DropoutKey(45, 3), packed); }});
  c.push_back({"relu_dropout packed", "f32", "[1," + std::to_string(rows) + ",512]", [rows](Device d) { return V{random({1, rows, 512}, 37, d)}; },
               [packed](const V& x) { return ops::relu_dropout(x[0], 0.1f, DropoutKey(46, 3), packed); }});
  c.push_back({"layer_norm", "f32", "[8192,512]", [](Device d) { return V{random({8192, 512}, 15, d, 3.0f), random({512}, 16, d), random({512}, 17, d)}; },
               [](const V& x) { return ops::layer_norm(x[0], x[1], x[2]); }});
  c.push_back({"softmax", "f32", "[4096,1000]", [](Device d) { return V{random({4096, 1000}, 18, d, 5.0f)}; },
               [](const V& x) { return ops::softmax(x[0]); }});
  c.push_back({"dropout", "f32", "[4096,2048]", [](Device d) { return V{random({4096, 2048}, 19, d)}; },
               [](const V& x) { return ops::dropout(x[0], 0.1f, DropoutKey(7)); }});
  c.push_back({"gelu", "f32", "[4096,2048]", [](Device d) { return V{random({4096, 2048}, 20, d, 4.0f)}; }, [](const V& x) { return ops::gelu(x[0]); }});
  auto targets = [](Device d) {
    std::vector<int32_t> t(4096);
    for (int i = 0; i < 4096; ++i) t[i] = static_cast<int32_t>(splitmix64(i) % 10000);
    return ops::to(Tensor::from_values<int32_t>({4096}, t), d);
  };
  c.push_back({"linear_cross_entropy", "f32", "[4096,512]x[10000,512]",
               [targets](Device d) { return V{random({4096, 512}, 21, d), random({10000, 512}, 22, d, 0.05f), random({10000}, 23, d), targets(d)}; },
               [](const V& x) { return ops::linear_cross_entropy(x[0], x[1], x[2], x[3], 0.1f, 0, ops::LinearProducts::f32()); }});
  c.push_back({"embedding", "f32", "[10000,512][4096]", [targets](Device d) { return V{random({10000, 512}, 24, d), targets(d)}; },
               [](const V& x) { return ops::embedding(x[0], x[1]); }});
  c.push_back({"sum", "f32", "[16M]", [](Device d) { return V{random({1 << 24}, 25, d)}; }, [](const V& x) { return ops::sum(x[0]); }});
  c.push_back({"clip_grad_norm", "f32", "[16M]", [](Device d) { return V{random({1 << 24}, 30, d)}; },
               [](const V& x) {
                 Tensor g = x[0].detach().clone();
                 ops::clip_to_norm(g, ops::sum_of_squares(g), 1.0f);
                 return g;
               },
               false});
  // beam search's step at batch 32, beam 4 over 32,000 words: 8 candidates of each row, pad and bos left out
  c.push_back({"top_log_probs", "f32", "[128,32000]", [](Device d) { return V{random({128, 32000}, 31, d, 4.0f)}; },
               [](const V& x) {
                 std::vector<std::vector<std::pair<double, int64_t>>> best;
                 TFM_CHECK(ops::top_log_probs(x[0], 8, {0, 2}, true, std::vector<uint8_t>(128, 1), best), "not finite");
                 std::vector<float> flat;
                 for (const auto& row : best)
                   for (const auto& [lp, id] : row) flat.push_back(static_cast<float>(lp)), flat.push_back(static_cast<float>(id));
                 return Tensor::from_vector({static_cast<int64_t>(flat.size())}, flat);
               },
               false});
  c.push_back({"adam_update", "f32", "[16M]",
               [](Device d) { return V{random({1 << 24}, 26, d), random({1 << 24}, 27, d), random({1 << 24}, 28, d, 0.1f), random({1 << 24}, 29, d, 0.01f)}; },
               [](const V& x) {
                 Tensor p = x[0].detach().clone(), m = x[2].detach().clone(), v = ops::mul(x[3].detach(), x[3].detach());
                 ops::adam_update({{p, x[1].detach(), m, v, true}}, {0.9f, 0.98f, 1e-9f, 1e-3f, 0.5f, 0.0f, 0.999f});
                 return ops::concat({p, m, v}, 0);
               },
               false});
  return c;
}

void stage_large() {
  for (const LargeCase& c : large_cases())
    run({"large", c.name + (c.backward ? " fwd+bwd" : ""), c.dtype, c.shape}, [&](Row& r) {
      r.tolerance = c.tolerance;
      compare_runs(r, [&] { return evaluate(c, g_device, &r.device_ms); }, [&] { return evaluate(c, Device::CPU, &r.cpu_ms); });
    });
}

// --- stage train: every family's training on the device against the CPU ---

std::ostringstream g_training_log;  // the runs' progress: not the check's output

// The training loss of every step of a run (its metrics.jsonl, logged at every step).
Values train_losses(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  Values out;
  for (std::string line; std::getline(in, line);)
    if (const size_t at = line.find("\"train_loss\":"); at != std::string::npos) out.push_back(std::stod(line.substr(at + 13)));
  return out;
}

// The weights of two checkpoints (every tensor, the optimiser's moments left out), as
// the norm-wise relative difference of the whole model: single tensors whose gradient
// is near 0 (a bias) move by Adam's +-lr on either side of 0 wherever rounding flips the
// sign, which says nothing about the model.
double checkpoint_difference(const std::string& a, const std::string& b) {
  const io::SafeTensors x = io::read_safetensors(a), y = io::read_safetensors(b);
  Values all_a, all_b;
  for (const auto& [name, t] : x.tensors) {
    if (name.rfind("optimizer.", 0) == 0) continue;
    const Tensor* other = y.find(name);
    if (!other) return INFINITY;
    const Values va = op_cases::values_of(t), vb = op_cases::values_of(*other);
    all_a.insert(all_a.end(), va.begin(), va.end()), all_b.insert(all_b.end(), vb.begin(), vb.end());
  }
  return relative_error(all_a, all_b);
}

// The worst |a - b| / max(1, |b|) over the steps of two runs' losses, and at which step.
std::pair<double, size_t> loss_difference(const Values& a, const Values& b) {
  std::pair<double, size_t> worst{0.0, 0};
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double e = std::fabs(a[i] - b[i]) / std::max(1.0, std::fabs(b[i]));
    if (e > worst.first) worst = {e, i};
  }
  return worst;
}

// One family's 20 steps (dropout on, the learning rate rising over 50 steps) on the CPU
// with every core and with one, and twice on the device: every step's loss and the
// weights at the end against the CPU's. The tolerance is 1e-3, or twice what the CPU's
// own two thread counts differ by where a run amplifies rounding more (a learning rate
// that peaks within 5 steps made translation chaotic: 1.6e-2 apart at step 20 on one
// CPU, 1 thread against 16, window 5); the device's two runs must be bitwise equal (the
// same dropout masks everywhere: the counter hash).
void check_family(const std::string& family, const std::string& dir, const std::function<TrainingResult(const TrainingOptions&)>& train,
                  TrainingOptions o) {
  o.max_steps = 20, o.log_every = 1, o.validate_every = 0, o.force = true, o.schedule.warmup = 50;
  auto run_on = [&](const std::string& device, const std::string& name, double* ms) {
    o.device = device, o.out_dir = dir + "/" + family + "-" + name;
    const double t0 = now_ms();
    train(o);
    *ms = (now_ms() - t0) / static_cast<double>(o.max_steps);
    return train_losses(o.out_dir);
  };
  const std::string cpu_dir = dir + "/" + family + "-cpu/last.safetensors", one_dir = dir + "/" + family + "-cpu1/last.safetensors",
                    device_dir = dir + "/" + family + "-device/last.safetensors";
  double cpu_spread = 0.0;
  run({"train", family + " 20 steps: losses", "f32", "steps"}, [&](Row& r) {
    double ms = 0;
    const Values cpu = run_on("cpu", "cpu", &r.cpu_ms);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const Values one = run_on("cpu", "cpu1", &ms);
    omp_set_num_threads(threads);
    const Values device = run_on(to_string(g_device), "device", &r.device_ms), again = run_on(to_string(g_device), "again", &ms);
    TFM_CHECK(cpu.size() == 20 && device.size() == 20, family << ": " << cpu.size() << " and " << device.size() << " losses logged");
    cpu_spread = loss_difference(one, cpu).first;
    r.tolerance = std::max(1e-3, 2 * cpu_spread);
    size_t worst = 0;
    std::tie(r.error, worst) = loss_difference(device, cpu);
    std::ostringstream note;
    note << "worst at step " << worst + 1 << "; CPU 1 vs " << threads << " threads " << std::scientific << std::setprecision(1) << cpu_spread;
    r.shape = note.str();
    r.deterministic = bitwise_equal(device, again) ? "yes" : "no";
  });
  run({"train", family + " 20 steps: weights", "f32", "model"}, [&](Row& r) {
    const double spread = checkpoint_difference(one_dir, cpu_dir);
    r.tolerance = std::max(1e-3, 2 * spread);
    r.error = checkpoint_difference(device_dir, cpu_dir);
    std::ostringstream note;
    note << "CPU 1 vs all threads " << std::scientific << std::setprecision(1) << spread;
    r.shape = note.str();
  });
}

// One step's gradient of every parameter of an encoder-decoder (the copy task's model,
// dropout on), on the device and on the CPU: the worst parameter's norm-wise error.
void check_gradients() {
  run({"train", "one step's gradients, every parameter", "f32", "copy-task model"}, [](Row& r) {
    r.tolerance = 1e-4;
    const models::TransformerConfig config = training::default_copy_model();
    Rng data(3);
    const training::Seq2SeqBatch batch = training::make_copy_batch(data, 32, 12, config.src_vocab);
    std::map<std::string, Values> cpu;
    for (Device d : {Device::CPU, g_device}) {
      models::EncoderDecoder model(config);
      Rng init(1);
      model.init_parameters(init);
      model.to(d);
      model.train();
      model.dropout_rng().set_state(7);
      autograd::backward(training::seq2seq_loss(model, batch, 0.1f));
      for (const auto& [name, p] : model.named_parameters()) {
        if (d == Device::CPU) cpu[name] = op_cases::values_of(p.grad());
        else r.error = std::max(r.error, relative_error(op_cases::values_of(p.grad()), cpu[name]));
      }
    }
  });
}

void stage_train() {
  check_gradients();
  const testing::SyntheticCorpus corpus;
  const testing::TempDir dir;
  std::string text;
  for (int i = 0; i < 200; ++i) text += "the quick brown fox jumps over the lazy dog " + std::to_string(i % 7) + "\n";
  testing::write_file(dir.path("text.txt"), text);
  testing::write_quadrant_set(dir.path(""), "train", 512, 2);
  testing::write_quadrant_set(dir.path(""), "t10k", 64, 3);

  CopyTask copy;
  copy.samples = 0;
  check_family("copy", dir.path(""), [&](const TrainingOptions& o) { return tfm::train(o, copy, {}, &g_training_log); }, CopyTask::training_defaults());
  TranslationTask mt;
  mt.train_src = mt.valid_src = corpus.src, mt.train_tgt = mt.valid_tgt = corpus.tgt, mt.src_vocab = mt.tgt_vocab = corpus.vocab;
  mt.model = R"({"d_model": 128, "heads": 4, "d_ff": 256, "encoder_layers": 2, "decoder_layers": 2})";
  mt.max_tokens = 1000, mt.valid_sentences = 20;
  check_family("translation", dir.path(""), [&](const TrainingOptions& o) { return tfm::train(o, mt, {}, &g_training_log); }, TranslationTask::training_defaults());
  LanguageModelTask lm;
  lm.data.text = dir.path("text.txt"), lm.sample_tokens = 0, lm.batch = 16;
  lm.model = R"({"d_model": 128, "heads": 4, "d_ff": 256, "layers": 2, "max_len": 64})";
  check_family("lm", dir.path(""), [&](const TrainingOptions& o) { return tfm::train(o, lm, {}, &g_training_log); }, LanguageModelTask::training_defaults());
  MaskedLmTask bert;
  bert.data.text = dir.path("text.txt"), bert.batch = 16;
  bert.model = R"({"d_model": 128, "heads": 4, "d_ff": 256, "layers": 2, "max_len": 64})";
  check_family("bert", dir.path(""), [&](const TrainingOptions& o) { return tfm::train(o, bert, {}, &g_training_log); }, MaskedLmTask::training_defaults());
  VitTask vit;
  vit.data_dir = dir.path(""), vit.batch = 64, vit.valid_images = 64;
  vit.model = R"({"image_size": 8, "patch": 4, "classes": 4, "d_model": 64, "d_ff": 128, "layers": 2, "heads": 4})";
  check_family("vit", dir.path(""), [&](const TrainingOptions& o) { return tfm::train(o, vit, {}, &g_training_log); }, VitTask::training_defaults());
}

// --- stage infer: every family's inference on the device against the CPU ---

std::string g_fixtures = TFM_FIXTURE_DIR, g_hf_fixtures = TFM_HF_FIXTURE_DIR;

// Runs `fn` on the CPU and twice on the device (timing the first device call after a
// warm-up is not the point here: each call loads its model), comparing what it returns.
template <class Fn>
void compare_inference(Row& r, Fn fn) {
  double t0 = now_ms();
  const auto cpu = fn("cpu");
  r.cpu_ms = now_ms() - t0;
  t0 = now_ms();
  const auto device = fn(to_string(g_device));
  r.device_ms = now_ms() - t0;
  r.deterministic = fn(to_string(g_device)) == device ? "yes" : "no";
  r.error = relative_error(device, cpu);
}

// Sentences as numbers for compare_inference: 0 where the device's equals the CPU's.
Values differing(const std::vector<std::string>& a) {
  Values out;
  for (const std::string& s : a) out.push_back(static_cast<double>(std::hash<std::string>{}(s) % 1000003));
  return out;
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line) && out.size() < 200;) out.push_back(line);
  return out;
}

void check_translation(const std::string& name, const std::string& model, const std::vector<std::string>& sources) {
  for (int64_t beam : {1, 4})
    run({"infer", name + (beam == 1 ? " greedy" : " beam 4"), "f32", std::to_string(sources.size()) + " sentences"}, [&](Row& r) {
      compare_inference(r, [&](const std::string& device) {
        TranslatorOptions o;
        o.device = device;
        TranslationOptions t;
        t.beam = beam;
        std::vector<std::string> out;
        for (const Translation& tr : Translator(model, o).translate(sources, t)) out.push_back(tr.hypotheses.at(0));
        return differing(out);
      });
      r.tolerance = 0.0;  // the same words
    });
}

void check_generation(const std::string& name, const std::string& model, const std::string& prompt) {
  for (float temperature : {0.0f, 0.8f})
    run({"infer", name + (temperature == 0 ? " greedy" : " sampled"), "f32", "40 tokens"}, [&](Row& r) {
      compare_inference(r, [&](const std::string& device) {
        GenerationOptions g;
        g.max_new_tokens = 40, g.temperature = temperature, g.seed = 3;
        return differing({Generator(model, {"", "f32", device}).generate(prompt, g)});
      });
      r.tolerance = 0.0;
    });
}

void check_embedding(const std::string& name, const std::string& model) {
  run({"infer", name, "f32", "mean and cls"}, [&](Row& r) {
    compare_inference(r, [&](const std::string& device) {
      const Encoder e(model, {"", "f32", device});
      const std::vector<std::string> s{"the quick brown fox", "a dog", "jumps over the lazy dog again and again"};
      Embeddings mean = e.embed(s, "mean"), cls = e.embed(s, "cls");
      Values out(mean.values.begin(), mean.values.end());
      out.insert(out.end(), cls.values.begin(), cls.values.end());
      return out;
    });
    r.tolerance = 1e-5;
  });
}

void check_classification(const std::string& name, const std::string& model, const std::vector<uint8_t>& pixels, int64_t count) {
  run({"infer", name, "f32", std::to_string(count) + " images"}, [&](Row& r) {
    compare_inference(r, [&](const std::string& device) {
      const Classification c = Classifier(model, {"", "f32", device}).classify(pixels, count);
      Values out(c.probabilities.begin(), c.probabilities.end());
      for (int64_t label : c.labels) out.push_back(static_cast<double>(label));  // a changed label moves this far
      return out;
    });
    r.tolerance = 1e-5;
  });
}

void stage_infer() {
  const std::string threads = g_fixtures + "/threads/", hf = g_hf_fixtures + "/";
  const std::vector<std::string> german = lines_of(threads + "mt.de");
  check_translation("translate (tfm)", threads + "mt.safetensors", german);
  check_translation("translate (HF marian)", hf + "marian_opus_mt_tiny_de_en", german);
  check_generation("generate (tfm lm)", threads + "lm.safetensors", "the ");
  check_generation("generate (HF gpt2)", hf + "gpt2_tiny", "Hello");
  check_embedding("embed (tfm bert)", threads + "bert.safetensors");
  check_embedding("embed (HF bert)", hf + "bert_tiny_uncased");
  if (!g_dry_run) {
    const data::ImageSet fashion = data::read_image_split(threads + "fashion", false, 10);
    check_classification("classify (tfm vit)", threads + "vit.safetensors", fashion.pixels, fashion.count);
    const Classifier vit(hf + "vit_tiny");
    std::vector<uint8_t> pixels;
    for (const char* image : {"image0.png", "image1.png"}) {
      const std::vector<uint8_t> p = vit.pixels_of(read_image(hf + "vit_tiny/" + image));
      pixels.insert(pixels.end(), p.begin(), p.end());
    }
    check_classification("classify (HF vit)", hf + "vit_tiny", pixels, 2);
  } else {
    check_classification("classify (tfm vit)", "", {}, 0);
    check_classification("classify (HF vit)", "", {}, 0);
  }
}

int usage(const char* why) {
  std::cerr << "tfm_gpu_check: " << why << "\nusage: tfm_gpu_check --stage env|memory|ops|large|train|infer [--device cuda|sim|cpu] [--fixtures DIR] [--hf-fixtures DIR] | --dry-run\n";
  return 2;
}

}  // namespace
}  // namespace tfm

int main(int argc, char** argv) {
  using namespace tfm;
  std::vector<std::string> stages;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dry-run") g_dry_run = true;
    else if (a == "--stage" && i + 1 < argc) stages.push_back(argv[++i]);
    else if (a == "--fixtures" && i + 1 < argc) g_fixtures = argv[++i];
    else if (a == "--hf-fixtures" && i + 1 < argc) g_hf_fixtures = argv[++i];
    else if (a == "--device" && i + 1 < argc) {
      const std::optional<Device> d = parse_device(argv[++i]);
      if (!d) return usage((std::string("unknown device ") + argv[i]).c_str());
      g_device = *d;
    } else return usage(("unknown argument " + a).c_str());
  }
  if (g_dry_run && stages.empty()) stages = {"env", "memory", "ops", "large", "train", "infer"};
  if (stages.empty()) return usage("name a stage, or --dry-run");
  for (const std::string& s : stages) {
    if (s == "env") stage_env();
    else if (s == "memory") stage_memory();
    else if (s == "ops") stage_ops();
    else if (s == "large") stage_large();
    else if (s == "train") stage_train();
    else if (s == "infer") stage_infer();
    else return usage(("unknown stage " + s).c_str());
  }
  return 0;
}
