// The backend op table (ggml's test-backend-ops is the model): every (op, dtype) that a
// device's kernel table claims (ops/kernels.h) runs through the op's front end on that
// device, forward and, where the op is differentiable in that dtype, backward, against
// one oracle: plain loops in double (tests/support/op_cases.cpp, which the GPU check
// shares), and central differences of those for the gradients. A claimed combination whose kernel is missing fails; so does a claim
// with no case here, so a new op or dtype cannot be claimed untested. A device this
// build or machine lacks is skipped with a message.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ops/convert.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "support/op_cases.h"
#include "tensor/error.h"

namespace tfm {

void PrintTo(Device d, std::ostream* os) { *os << to_string(d); }

namespace {

using namespace op_cases;

class BackendOps : public ::testing::TestWithParam<Device> {};

TEST_P(BackendOps, EveryClaimedOpAndDtypeMatchesTheOracle) {
  std::string why;
  if (!usable(GetParam(), why)) GTEST_SKIP() << to_string(GetParam()) << " skipped: " << why;
  const std::vector<OpCase> all = cases();
  for (const ops::Claim& claim : ops::kernels(GetParam()).claims) {
    SCOPED_TRACE(claim.op + " in " + to_string(claim.dtype) + " on " + to_string(GetParam()));
    int ran = 0;
    for (const OpCase& c : all) {
      if (c.op != claim.op) continue;
      ++ran;
      try {
        const Outcome f = run_forward(c, GetParam(), claim.dtype);
        EXPECT_LE(f.error, forward_tolerance(claim.dtype)) << "forward: element " << f.at << " is " << f.got[f.at] << ", the oracle says "
                                                            << f.want[f.at];
        if (!has_backward(c, claim.dtype)) continue;
        for (const Outcome& b : run_backward(c, GetParam(), claim.dtype))
          EXPECT_LE(b.error, backward_tolerance(claim.dtype)) << "backward: input " << b.input << " element " << b.at << " is "
                                                              << b.got[b.at] << ", the oracle's difference " << b.want[b.at];
      } catch (const Error& e) {
        ADD_FAILURE() << "claimed but failed: " << e.what();
      }
    }
    EXPECT_GT(ran, 0) << "a claim with no case in this table";
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, BackendOps, ::testing::Values(Device::CPU, Device::Sim, Device::CUDA),
                         [](const auto& info) { return to_string(info.param); });

// Every case's op is claimed by the CPU, the oracle's device, in f32 (or, for ops on
// other types, in some dtype): the table has no case that nothing runs.
TEST(BackendOpTable, EveryCaseIsClaimedByTheCpu) {
  const auto& claims = ops::kernels(Device::CPU).claims;
  for (const OpCase& c : cases())
    EXPECT_TRUE(std::any_of(claims.begin(), claims.end(), [&](const ops::Claim& k) { return k.op == c.op; })) << c.op;
}

// An op given tensors on two devices, or a dtype it does not take, is a clear error.
TEST(BackendOpTable, MixedDevicesAndWrongDtypesAreClearErrors) {
  const Tensor a = Tensor::ones({2});
  try {
    (void)ops::mul(a, ops::to(a, DType::bf16));
    ADD_FAILURE() << "a bf16 operand was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "mul: the second operand must be f32, got bf16 [2]");
  }
  std::string why;
  if (usable(Device::CUDA, why)) {
    try {
      (void)ops::add(a, ops::to(a, Device::CUDA));
      ADD_FAILURE() << "tensors on two devices were accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("add: tensors on different devices (cpu and cuda)"), std::string::npos) << e.what();
    }
  } else {
    try {
      (void)Tensor::empty({2}, DType::f32, Device::CUDA);
      ADD_FAILURE() << "a CUDA tensor without CUDA";
    } catch (const Error& e) {
      SUCCEED() << e.what();
    }
  }
}

}  // namespace
}  // namespace tfm
