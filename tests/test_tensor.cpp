// Tensor views and the semantics of the fused attention op.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>

#include "autograd/autograd.h"
#include "ops/attention.h"
#include "ops/convert.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/cpu/vec_math.h"
#include "support/compare.h"
#include "support/gradcheck.h"
#include "support/process.h"
#include "tensor/allocator.h"
#include "tensor/environment.h"
#include "tensor/error.h"
#include "tensor/float_formats.h"

namespace tfm {
namespace {

// backward() reports each leaf once, as soon as its gradient is complete: in a chain
// w1 -> w2 -> w3, the last weight first; a leaf used twice only after both uses.
TEST(Autograd, ReportsEachLeafOnceItsGradientIsComplete) {
  Tensor x = testing::random_tensor({4, 3}, 1), w1 = testing::random_tensor({3}, 2).set_requires_grad(true),
         w2 = testing::random_tensor({3}, 3).set_requires_grad(true), w3 = testing::random_tensor({3}, 4).set_requires_grad(true);
  const Tensor h = ops::mul(ops::mul(x, w1), w2);
  const Tensor loss = ops::sum(ops::add(ops::mul(h, w3), ops::mul(h, w2)));  // w2 used twice
  std::vector<const TensorImpl*> order;
  std::vector<std::vector<float>> at_report;
  autograd::backward(loss, [&](TensorImpl* leaf) {
    order.push_back(leaf);
    at_report.push_back(Tensor(leaf->grad).to_vector());
  });
  ASSERT_EQ(order, (std::vector<const TensorImpl*>{w3.impl(), w2.impl(), w1.impl()}));
  const Tensor leaves[] = {w3, w2, w1};
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(at_report[i], leaves[i].grad().to_vector()) << "leaf " << i << " reported before it was complete";
}

// Freed buffers are reused (best fit, split, merged) rather than taken afresh, and a
// region grows at its end, its free last block included, so a training step whose
// buffer sizes change from batch to batch stays within one stretch of memory.
TEST(Allocator, ReusesSplitsMergesAndGrowsAtTheEnd) {
  HostAddressSpace host;
  CachingAllocator cache(host, 8 << 20);  // regions of 8 MiB
  const size_t kib = 1 << 10, mib = 1 << 20;
  auto alloc = [&](size_t bytes) { return cache.allocate(bytes); };
  auto ptr = [](const Allocation& a) { return static_cast<char*>(a.ptr); };
  // Up to 64 KiB: a freed block waits for a request of its size.
  const Allocation tiny = alloc(100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(tiny.ptr) % 64, 0u);
  cache.deallocate(tiny);
  const Allocation same = alloc(128);
  EXPECT_EQ(same.ptr, tiny.ptr) << "the same size (rounded to 64 bytes) reuses it";
  cache.deallocate(same);
  EXPECT_NE(alloc(192).ptr, tiny.ptr) << "another size does not";
  // Larger small blocks: best fit, split, merged (the small pool's region backs 2 MiB).
  const Allocation a = alloc(100 * kib), b = alloc(300 * kib);
  EXPECT_EQ(ptr(b), ptr(a) + 100 * kib) << "a block is cut from the free rest";
  cache.deallocate(a);
  const Allocation a2 = alloc(80 * kib);
  EXPECT_EQ(a2.ptr, a.ptr) << "the freed block is the best fit";
  cache.deallocate(a2);
  cache.deallocate(b);
  const Allocation ab = alloc(400 * kib);
  EXPECT_EQ(ab.ptr, a.ptr) << "freed neighbours merge into one block";
  EXPECT_EQ(cache.committed_bytes(), 2 * mib);

  // The large pool: regions grow at their end.
  const Allocation big = alloc(5 * mib / 2);  // 4 MiB backed
  ptr(big)[5 * mib / 2 - 1] = 1;
  EXPECT_EQ(cache.committed_bytes(), 6 * mib);
  const Allocation after = alloc(5 * mib / 4);  // fits the backed rest
  EXPECT_EQ(ptr(after), ptr(big) + 5 * mib / 2);
  EXPECT_EQ(cache.committed_bytes(), 6 * mib);
  cache.deallocate(after);
  const Allocation bigger = alloc(5 * mib);  // the free end joins what grows
  EXPECT_EQ(bigger.ptr, after.ptr) << "the region grew at its end instead of starting anew";
  EXPECT_EQ(cache.committed_bytes(), 10 * mib);
  cache.deallocate(big);
  cache.deallocate(bigger);
  const Allocation whole = alloc(8 * mib);
  EXPECT_EQ(whole.ptr, big.ptr) << "the whole region is one free block again";
  EXPECT_EQ(cache.region_count(), 2u);
  const Allocation more = alloc(3 * mib);  // the region is full: a second one
  EXPECT_EQ(cache.region_count(), 3u);
  cache.deallocate(more);
  cache.deallocate(whole);
  cache.deallocate(ab);
}

// A model's weights start as zeros that take no memory until written: zeros even where
// the cache hands out memory another tensor wrote (the pages given back read as zeros),
// for sizes of part of a page, pages, and pages with partial ones at the ends.
TEST(Allocator, UntouchedZerosAreZerosWhateverTheMemoryHeldBefore) {
  for (int64_t n : {int64_t{3}, int64_t{1000}, (int64_t{3} << 20) + 5}) {
    { const Tensor dirty = Tensor::full({n}, 7.0f); }  // freed: its memory is the cache's next
    const std::vector<float> v = Tensor::untouched_zeros({n}).to_vector();
    EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](float x) { return x == 0.0f; })) << n << " floats";
  }
}

// After loading, the checkpoint's freed tensors go back to the system: a large free
// block's whole pages (it reads as zeros after), while blocks in use keep theirs.
TEST(Allocator, ReleasesTheMemoryOfFreeBlocksKeepingTheirAddresses) {
  HostAddressSpace host;
  CachingAllocator cache(host, 64 << 20);
  const size_t mib = 1 << 20;
  const Allocation kept = cache.allocate(4 * mib), freed = cache.allocate(8 * mib);
  std::fill_n(static_cast<char*>(kept.ptr), 4 * mib, 1);
  std::fill_n(static_cast<char*>(freed.ptr), 8 * mib, 1);
  cache.deallocate(freed);
  EXPECT_GE(cache.release_cached(), 8 * mib) << "the freed block and the region's free rest";
  EXPECT_EQ(static_cast<char*>(kept.ptr)[4 * mib - 1], 1) << "a block in use keeps its memory";
  const Allocation again = cache.allocate(8 * mib);
  EXPECT_EQ(again.ptr, freed.ptr) << "the addresses stay the cache's";
  EXPECT_EQ(static_cast<char*>(again.ptr)[0], 0) << "its pages were given back";
  static_cast<char*>(again.ptr)[0] = 2;  // and are writable again
  cache.deallocate(again);
  cache.deallocate(kept);
}

// Every dtype converts to every other (PyTorch's Tensor.to): floats round to nearest
// even, floats become integers by truncation (saturated, NaN as 0), non-zero is true.
// The simulated device's memory (tensor/device.h) is out of reach of host code, as a
// GPU's is; ops, copies and reads back through the device layer work, with the CPU's
// results; the GPU's refusal where a build or machine has none is one line.
TEST(Devices, TheSimulatedDevicesMemoryIsReachedOnlyThroughTheDeviceLayer) {
  const Tensor host = Tensor::from_vector({2, 3}, {1, -2, 3, -4, 5, -6});
  const Tensor sim = ops::to(host, Device::Sim);
  EXPECT_EQ(sim.device(), Device::Sim);
  try {
    (void)sim.data();
    ADD_FAILURE() << "host code read the simulated device's memory";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "a tensor on sim (shape [2, 3]) was read or written as host memory; move it with ops::to(tensor, Device::CPU) first");
  }
  const Tensor y = ops::relu(ops::transpose(sim, 0, 1).clone());  // a strided copy and a kernel, on the device
  EXPECT_EQ(y.device(), Device::Sim);
  EXPECT_EQ(y.to_vector(), (std::vector<float>{1, 0, 0, 5, 3, 0}));
  EXPECT_EQ(Tensor::full({2}, 2.5f, Device::Sim).to_vector(), (std::vector<float>{2.5f, 2.5f}));
  EXPECT_EQ(ops::sum(sim).item(), -3.0f);
  EXPECT_THROW((void)ops::add(host, sim), Error);
  EXPECT_EQ(ops::usable_device("sim"), Device::Sim);
  EXPECT_THROW((void)ops::usable_device("tpu"), Error);
}

TEST(Convert, EveryDtypeToEveryOther) {
  const std::vector<float> values = {0.0f, 1.0f, -2.5f, 100.75f, 3.0e9f, -3.0e9f};
  const Tensor x = Tensor::from_vector({2, 3}, values);
  EXPECT_EQ(ops::to(x, DType::i64).values<int64_t>(), (std::vector<int64_t>{0, 1, -2, 100, 3000000000, -3000000000}));
  EXPECT_EQ(ops::to(x, DType::i32).values<int32_t>(), (std::vector<int32_t>{0, 1, -2, 100, INT32_MAX, INT32_MIN}));
  EXPECT_EQ(ops::to(x, DType::u8).values<uint8_t>(), (std::vector<uint8_t>{0, 1, 0, 100, 255, 0}));
  EXPECT_EQ(ops::to(x, DType::i8).values<int8_t>(), (std::vector<int8_t>{0, 1, -2, 100, 127, -128}));
  EXPECT_EQ(ops::to(x, DType::boolean).values<bool>(), (std::vector<bool>{false, true, true, true, true, true}));
  EXPECT_EQ(ops::to(ops::to(x, DType::bf16), DType::f32).to_vector(), (std::vector<float>{0, 1, -2.5f, 101, 3003121664.0f, -3003121664.0f}));
  EXPECT_EQ(ops::to(ops::to(x, DType::f16), DType::f32).to_vector(),
            (std::vector<float>{0, 1, -2.5f, 100.75f, INFINITY, -INFINITY}));
  EXPECT_EQ(ops::to(Tensor::from_vector({1}, {NAN}), DType::i32).values<int32_t>(), std::vector<int32_t>{0});
  // Round trips between every pair, on values all dtypes hold exactly.
  const Tensor small = Tensor::from_vector({4}, {0, 1, 7, 100});
  const DType all[] = {DType::f32, DType::bf16, DType::f16, DType::i64, DType::i32, DType::i8, DType::u8};
  for (DType a : all)
    for (DType b : all)
      EXPECT_EQ(ops::to(ops::to(ops::to(small, a), b), DType::f32).to_vector(), small.to_vector()) << to_string(a) << " -> " << to_string(b);
  // A non-contiguous view converts in logical order.
  EXPECT_EQ(ops::to(ops::transpose(x, 0, 1), DType::i32).values<int32_t>(), (std::vector<int32_t>{0, 100, 1, INT32_MAX, -2, INT32_MIN}));
}

// Every half-precision number survives f16 -> f32 -> f16; halfway cases round to even.
TEST(Convert, HalfPrecisionIsExactAndRoundsToNearestEven) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue;  // NaN
    ASSERT_EQ(to_f16(from_f16(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
  EXPECT_EQ(from_f16(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // halfway: to even (down)
  EXPECT_EQ(to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // halfway: to even (up)
  EXPECT_EQ(to_f16(std::ldexp(1.0f, -25)), 0x0000);  // halfway to the smallest subnormal: to even
  EXPECT_EQ(to_f16(3 * std::ldexp(1.0f, -25)), 0x0002);
  EXPECT_EQ(to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(to_f16(65520.0f), 0x7c00);  // past the largest half: infinity
  EXPECT_EQ(to_f16(-NAN) & 0x7e00, 0x7e00);
}

// f() throws tfm::Error whose message contains `part`.
template <class F>
void expect_error(F&& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << part;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

// A tensor of one dtype read as another, a conversion inside autograd, a device this
// build lacks: each a clear error.
TEST(Convert, WrongDtypesAndDevicesAreClearErrors) {
  const Tensor ids = Tensor::from_values<int32_t>({2}, {3, 4});
  expect_error([&] { ids.data(); }, "a tensor of dtype i32 (shape [2]) was given where f32 is needed");
  expect_error([&] { ops::add(ids, ids); }, "add: the first operand must be f32, got i32 [2]");
  Tensor w = Tensor::ones({2}).set_requires_grad(true);
  expect_error([&] { ops::to(w, DType::bf16); }, "is not differentiable");
  try {  // a build with TFM_CUDA on a machine with a GPU moves it; any other refuses in one line
    EXPECT_EQ(ops::to(w, Device::CUDA).device(), Device::CUDA);
  } catch (const Error& e) {
    const std::string why = e.what();
    EXPECT_TRUE(why.find("no cuda support") != std::string::npos || why.find("cuda: no usable GPU") != std::string::npos) << why;
    EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  }
  EXPECT_TRUE(ops::to(w, DType::f32).same(w));
  EXPECT_TRUE(ops::to(w, Device::CPU).same(w));
}

TEST(Tensor, ViewsShareStorageAndReadInLogicalOrder) {
  Tensor t = Tensor::from_vector({2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor tt = ops::transpose(t, 0, 1);  // [3, 2], a view
  EXPECT_FALSE(tt.is_contiguous());
  EXPECT_EQ(tt.to_vector(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  Tensor s = ops::slice(t, 1, 1, 3);  // columns 1..2
  EXPECT_EQ(s.to_vector(), (std::vector<float>{1, 2, 4, 5}));
  t.data()[1] = 10;
  EXPECT_EQ(s.to_vector()[0], 10) << "a slice is a view, not a copy";
  EXPECT_EQ(ops::reshape(tt, {6}).to_vector(), (std::vector<float>{0, 3, 10, 4, 2, 5})) << "reshape of a non-contiguous view copies";
  EXPECT_EQ(ops::reshape(t, {3, -1}).shape(), (Shape{3, 2}));
  EXPECT_EQ(ops::concat({t, t}, 0).shape(), (Shape{4, 3}));
  EXPECT_THROW(ops::reshape(t, {4, 2}), Error);
  EXPECT_THROW(ops::slice(t, 1, 2, 5), Error);
}

// Copies and fills above 65,536 elements split over the threads (rows of evenly spaced
// views, chunks of contiguous ones); every element must land where one thread puts it.
TEST(Tensor, LargeCopiesFillsAndSliceGradientsLandEveryElement) {
  const int64_t A = 3, R = 300, C = 240;
  Tensor x = testing::random_tensor({A, R, C}, 3).set_requires_grad(true);
  const Tensor window = ops::slice(x, 2, 40, 160), copy = ops::contiguous(window), whole = x.detach().clone();  // [3, 300, 120]: rows 240 apart
  const Tensor transposed = ops::contiguous(ops::transpose(x.detach(), 0, 1));                                 // uneven rows: element by element
  for (int64_t a = 0; a < A; ++a)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c) {
        const float v = x.data()[(a * R + r) * C + c];
        ASSERT_EQ(whole.data()[(a * R + r) * C + c], v);
        ASSERT_EQ(transposed.data()[(r * A + a) * C + c], v);
        if (c >= 40 && c < 160) ASSERT_EQ(copy.data()[(a * R + r) * 120 + c - 40], v);
      }
  Tensor filled = Tensor::full({A * R * C + 5}, 2.5f);
  for (int64_t i = 0; i < filled.numel(); ++i) ASSERT_EQ(filled.data()[i], 2.5f) << i;
  // Two overlapping slices' gradients add into one buffer: 1 + 1 where they overlap.
  autograd::backward(ops::add(ops::sum(ops::slice(x, 2, 0, 160)), ops::sum(ops::slice(x, 2, 100, 240))));
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t c = i % C;
    ASSERT_EQ(x.grad().data()[i], (c < 160 ? 1.0f : 0.0f) + (c >= 100 ? 1.0f : 0.0f)) << i;
  }
}

TEST(Tensor, StorageIs64ByteAligned) {
  for (int64_t n : {1, 3, 17, 1000}) EXPECT_EQ(reinterpret_cast<uintptr_t>(Tensor::empty({n}).data()) % 64, 0u);
  EXPECT_EQ(Tensor::empty({2}).device(), Device::CPU);
}

TEST(Attention, WeightsAreDistributionsThatRespectBothMasks) {
  ops::AttentionMask mask;
  const std::vector<uint8_t> padding{0, 0, 0, 1, 0, 0, 1, 1};  // batch 2, 4 keys
  mask.key_padding = testing::bool_tensor({2, 4}, padding);
  mask.causal = true;
  Tensor x = testing::random_tensor({2, 4, 8}, 5), weights;
  ops::attention(x, x, x, 2, mask, 0.0f, 0, &weights);
  ASSERT_EQ(weights.shape(), (Shape{2, 2, 4, 4}));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t i = 0; i < 4; ++i) {
        double total = 0;
        for (int64_t j = 0; j < 4; ++j) {
          float w = weights.data()[((b * 2 + h) * 4 + i) * 4 + j];
          if (j > i || padding[b * 4 + j]) EXPECT_EQ(w, 0.0f) << "b" << b << " h" << h << " i" << i << " j" << j;
          total += w;
        }
        EXPECT_NEAR(total, 1.0, 1e-6);
      }
}

// Short sequences (up to 48 keys, 96 under the causal mask) and decoding steps go
// by dot products per query and key, longer ones by two GEMM calls per head: each
// query's row of a sequence's result must be what it gets alone (its visible keys
// only, under the causal mask). Geometries cover both paths on either side of the
// limit and the kernels' tails: keys not a multiple of 8, head widths below 8,
// between multiples of 8 and above 64.
TEST(Attention, OneQueryGivesItsRowOfAllQueries) {
  struct Geometry {
    int64_t keys, heads, width;
    bool causal;
  };
  for (const Geometry g : {Geometry{7, 4, 16, false}, Geometry{30, 2, 2 * 45, false}, Geometry{43, 1, 72, false},
                           Geometry{53, 2, 64, false}, Geometry{60, 2, 64, true}, Geometry{100, 2, 32, true},
                           Geometry{12, 2, 16, true}}) {
    const int64_t queries = 5;
    ops::AttentionMask mask;
    std::vector<uint8_t> padding;
    for (int64_t i = 0; i < 2 * g.keys; ++i) padding.push_back(i == 2 || i == 2 * g.keys - 2);  // batch 2
    mask.key_padding = testing::bool_tensor({2, g.keys}, padding);
    mask.causal = g.causal;
    const Tensor q = testing::random_tensor({2, queries, g.width}, 1), k = testing::random_tensor({2, g.keys, g.width}, 2),
                 v = testing::random_tensor({2, g.keys, g.width}, 3);
    const Tensor all = ops::attention(q, k, v, g.heads, mask);
    for (int64_t i = 0; i < queries; ++i) {
      const int64_t visible = g.causal ? g.keys - queries + i + 1 : g.keys;
      ops::AttentionMask alone;
      alone.key_padding = ops::contiguous(ops::slice(mask.key_padding, 1, 0, visible));
      const Tensor one = ops::attention(ops::slice(q, 1, i, i + 1), ops::slice(k, 1, 0, visible), ops::slice(v, 1, 0, visible), g.heads, alone);  // [2, 1, width]
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t c = 0; c < g.width; ++c)
          EXPECT_NEAR(one.data()[b * g.width + c], all.data()[(b * queries + i) * g.width + c], 1e-5f)
              << g.keys << " keys, b" << b << " i" << i << " c" << c;
    }
  }
}

// A cache's index (key_rows) must give what gathering each query row's keys and
// values into a batch of their own gives.
TEST(Attention, IndexedKeysEqualGatheredOnes) {
  const int64_t stored = 3, batch = 4, keys = 5, width = 16;
  const Tensor q = testing::random_tensor({batch, 1, width}, 1), k = testing::random_tensor({stored, keys, width}, 2),
               v = testing::random_tensor({stored, keys, width}, 3);
  std::vector<int32_t> rows(keys * batch);  // [batch, keys]
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int32_t>((i * 5 + i / 3) % stored);
  ops::AttentionMask mask;
  std::vector<uint8_t> padding(batch * keys, 0);
  padding[1 * keys + 4] = 1;
  mask.key_padding = testing::bool_tensor({batch, keys}, padding);
  autograd::NoGradGuard no_grad;
  const Tensor indexed = ops::attention(q, k, v, 2, mask, 0.0f, 0, nullptr, Tensor::from_values<int32_t>({batch, keys}, rows));
  Tensor gk = Tensor::empty({batch, keys, width}), gv = Tensor::empty({batch, keys, width});
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = 0; j < keys; ++j) {
      ops::slice(ops::slice(gk, 0, b, b + 1), 1, j, j + 1).copy_from(ops::slice(ops::slice(k, 0, rows[b * keys + j], rows[b * keys + j] + 1), 1, j, j + 1));
      ops::slice(ops::slice(gv, 0, b, b + 1), 1, j, j + 1).copy_from(ops::slice(ops::slice(v, 0, rows[b * keys + j], rows[b * keys + j] + 1), 1, j, j + 1));
    }
  const Tensor gathered = ops::attention(q, gk, gv, 2, mask);
  for (int64_t i = 0; i < batch * width; ++i) EXPECT_FLOAT_EQ(indexed.data()[i], gathered.data()[i]) << i;
}

// Training's encoder packs its sentences one after another without padding
// (ops::PackedSequences). Each real row's result and gradients must be what the padded
// batch gives it: self-attention (both sides packed, causal or not) and encoder-decoder
// attention (keys packed), on the dot-product and the GEMM paths, under dropout too
// (a sample's masks do not depend on the batch's layout: tensor/rng.h's DropoutKey).
TEST(Attention, PackedSequencesGiveTheirRowsOfThePaddedBatch) {
  const int64_t batch = 3, width = 16, heads = 2, queries = 5;
  for (const int64_t longest : {11, 60})
    for (const bool causal : {false, true})
      for (const float dropout : {0.0f, 0.3f}) {
        const std::vector<int64_t> lengths{longest - 4, longest, 3};
        ops::AttentionMask padded_mask;
        std::vector<uint8_t> padding;
        auto sequences = std::make_shared<ops::PackedSequences>();
        std::vector<int64_t> positions;
        for (int64_t b = 0; b < batch; ++b) {
          sequences->start.push_back(static_cast<int64_t>(positions.size()));
          sequences->length.push_back(lengths[b]);
          for (int64_t t = 0; t < longest; ++t) {
            padding.push_back(t >= lengths[b]);
            if (t < lengths[b]) positions.push_back(b * longest + t);
          }
        }
        padded_mask.key_padding = testing::bool_tensor({batch, longest}, padding);
        const int64_t tokens = static_cast<int64_t>(positions.size());
        auto pack = [&](const Tensor& x) {  // [batch, longest, w] -> [1, tokens, w]
          return ops::reshape(ops::gather_rows(ops::reshape(x, {batch * longest, x.size(2)}), Tensor::from_values(positions)), {1, tokens, x.size(2)});
        };
        const std::string where = std::to_string(longest) + " keys" + (causal ? ", causal" : "") + ", dropout " + std::to_string(dropout);
        // Self-attention: q, k, v slices of one projection, as in the encoder.
        Tensor qkv = testing::random_tensor({batch, longest, 3 * width}, 7).set_requires_grad(true);
        Tensor qkv_packed = pack(qkv.detach()).set_requires_grad(true);
        ops::AttentionMask packed_mask;
        packed_mask.causal = padded_mask.causal = causal;
        packed_mask.packed_queries = packed_mask.packed_keys = sequences;
        auto self = [&](const Tensor& x, const ops::AttentionMask& m) {
          return ops::attention(ops::slice(x, 2, 0, width), ops::slice(x, 2, width, 2 * width), ops::slice(x, 2, 2 * width, 3 * width), heads, m, dropout, 42);
        };
        const Tensor out = pack(self(qkv, padded_mask)), out_packed = self(qkv_packed, packed_mask);
        EXPECT_TENSOR_NEAR("self-attention, " + where, out_packed, out, 1e-6);
        const Tensor w = testing::random_tensor(out.shape(), 8);  // the loss weighs real rows only
        autograd::backward(ops::sum(ops::mul(out, w)));
        autograd::backward(ops::sum(ops::mul(out_packed, w)));
        EXPECT_TENSOR_NEAR("self-attention gradient, " + where, qkv_packed.grad(), pack(qkv.grad()), 1e-6);

        // Encoder-decoder attention: padded queries, packed keys and values.
        if (causal) continue;
        Tensor q = testing::random_tensor({batch, queries, width}, 9).set_requires_grad(true);
        Tensor kv = testing::random_tensor({batch, longest, 2 * width}, 10).set_requires_grad(true);
        Tensor q2 = q.detach().clone().set_requires_grad(true), kv_packed = pack(kv.detach()).set_requires_grad(true);
        ops::AttentionMask memory_mask;
        memory_mask.packed_keys = sequences;
        const Tensor cross = ops::attention(q, ops::slice(kv, 2, 0, width), ops::slice(kv, 2, width, 2 * width), heads, padded_mask, dropout, 43);
        const Tensor cross_packed =
            ops::attention(q2, ops::slice(kv_packed, 2, 0, width), ops::slice(kv_packed, 2, width, 2 * width), heads, memory_mask, dropout, 43);
        EXPECT_TENSOR_NEAR("encoder-decoder attention, " + where, cross_packed, cross, 1e-6);
        const Tensor wc = testing::random_tensor(cross.shape(), 11);
        autograd::backward(ops::sum(ops::mul(cross, wc)));
        autograd::backward(ops::sum(ops::mul(cross_packed, wc)));
        EXPECT_TENSOR_NEAR("encoder-decoder query gradient, " + where, q2.grad(), q.grad(), 1e-6);
        EXPECT_TENSOR_NEAR("encoder-decoder key/value gradient, " + where, kv_packed.grad(), pack(kv.grad()), 1e-6);
      }
}

// A sample's dropout masks depend on its place in the batch alone (tensor/rng.h's
// DropoutKey): a process computing rows [1, 3) of a batch split across processes draws
// what one process draws for them, and a sentence padded to another length or packed
// without padding keeps its masks.
TEST(Dropout, ASampleMasksDependOnItsPlaceInTheBatchAlone) {
  const float p = 0.4f;
  const uint64_t key = 17;
  const Tensor x = testing::random_tensor({4, 6, 8}, 3);  // [batch, len, features]
  const Tensor whole = ops::dropout(x, p, key), share = ops::dropout(ops::slice(x, 0, 1, 3).clone(), p, DropoutKey(key, 1));
  EXPECT_TENSOR_NEAR("rows 1 and 2 alone", share, ops::slice(whole, 0, 1, 3).clone(), 0.0);
  const Tensor longer = ops::concat({x, Tensor::zeros({4, 3, 8})}, 1);  // padded to 9
  EXPECT_TENSOR_NEAR("padded further", ops::slice(ops::dropout(longer, p, key), 1, 0, 6).clone(), whole, 0.0);
  auto packing = std::make_shared<ops::PackedSequences>();
  packing->start = {0, 6, 10}, packing->length = {6, 4, 2};  // rows 0-2, of 6, 4 and 2 tokens
  const Tensor packed = ops::concat({ops::slice(x, 0, 0, 1), ops::slice(ops::slice(x, 0, 1, 2), 1, 0, 4), ops::slice(ops::slice(x, 0, 2, 3), 1, 0, 2)}, 1);
  const Tensor dropped = ops::dropout(packed, p, key, packing);  // [1, 12, 8]
  EXPECT_TENSOR_NEAR("packed row 1", ops::slice(dropped, 1, 6, 10).clone(), ops::slice(ops::slice(whole, 0, 1, 2), 1, 0, 4).clone(), 0.0);
  EXPECT_TENSOR_NEAR("packed row 2, relu", ops::slice(ops::relu_dropout(packed, p, key, packing), 1, 10, 12).clone(),
                     ops::slice(ops::slice(ops::relu_dropout(x, p, key), 0, 2, 3), 1, 0, 2).clone(), 0.0);
  // Attention's probabilities: rows 1 and 2 of four, queries and keys padded further.
  const Tensor qkv = testing::random_tensor({4, 5, 3 * 8}, 4);
  auto attend = [&](const Tensor& t, DropoutKey k) {
    return ops::attention(ops::slice(t, 2, 0, 8), ops::slice(t, 2, 8, 16), ops::slice(t, 2, 16, 24), 2, ops::AttentionMask{}, p, k);
  };
  EXPECT_TENSOR_NEAR("attention rows 1 and 2 alone", attend(ops::slice(qkv, 0, 1, 3).clone(), DropoutKey(key, 1)),
                     ops::slice(attend(qkv, key), 0, 1, 3).clone(), 1e-6);
}

// Beam search finds its candidates with it: every entry above the bar, in order, from
// any start, NaN and -inf never, across the 8-wide blocks and the scalar tail.
TEST(VecMath, FirstAboveVisitsWhatAScanWould) {
  std::vector<float> x(37);
  for (size_t j = 0; j < x.size(); ++j) x[j] = static_cast<float>((j * 7) % 11) - 5.0f;
  x[3] = std::numeric_limits<float>::quiet_NaN(), x[20] = -std::numeric_limits<float>::infinity();
  for (float bar : {-std::numeric_limits<float>::infinity(), 0.0f, 4.0f, 5.0f})
    for (int64_t from = 0; from <= 37; from += 5) {
      std::vector<int64_t> expected, found;
      for (int64_t j = from; j < 37; ++j)
        if (x[j] > bar) expected.push_back(j);
      for (int64_t j = ops::cpu::vec::first_above(x.data(), from, 37, bar); j < 37; j = ops::cpu::vec::first_above(x.data(), j + 1, 37, bar))
        found.push_back(j);
      EXPECT_EQ(found, expected) << "bar " << bar << " from " << from;
    }
}

// The environment's on/off settings (TFM_FLASH_ATTENTION, TFM_TENSOR_CORE_ATTENTION,
// TFM_CUDA_PROFILE): TFM_CUDA_PROFILE=0 once turned the profile on, and "off" left flash
// attention on.
TEST(Environment, SwitchesReadOneRule) {
  const char* name = "TFM_TEST_SWITCH";
  ::unsetenv(name);
  EXPECT_TRUE(env_switch(name, true));
  EXPECT_FALSE(env_switch(name, false));
  for (const char* on : {"1", "true", "ON", "yes"}) {
    ::setenv(name, on, 1);
    EXPECT_TRUE(env_switch(name, false)) << on;
  }
  for (const char* off : {"0", "False", "off", "no"}) {
    ::setenv(name, off, 1);
    EXPECT_FALSE(env_switch(name, true)) << off;
  }
  ::setenv(name, "maybe", 1);
  EXPECT_EQ(testing::error_of([&] { env_switch(name, true); }), "TFM_TEST_SWITCH=maybe: set it to 1 (on, true, yes) or 0 (off, false, no)");
  ::unsetenv(name);
}

}  // namespace
}  // namespace tfm
