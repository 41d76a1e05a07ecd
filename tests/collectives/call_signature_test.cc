// The agreement token: every field of a call's signature is part of it, so a call that differs
// from another in any one field never shares its token, neither in full nor in the low 30 bits
// that travel in an MPI tag (recursive_doubling.h); merging tokens keeps only a common one.
#include "collectives/call_signature.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace ringtrain::collectives {
namespace {

constexpr std::uint64_t kTagBits = (std::uint64_t{1} << 30) - 1;

TEST(AgreementToken, ChangingAnyOneFieldChangesTheTokenAndItsTagBits) {
  const CallSignature base =
      makeSignature(41, CollectiveKind::kAllreduce, 1000, DataType::kFloat32, 0, -1);
  const std::uint64_t token = agreementToken(base);
  EXPECT_NE(token, kDisagreement);
  std::int64_t CallSignature::*fields[] = {&CallSignature::sequence, &CallSignature::kind,
                                           &CallSignature::count,    &CallSignature::dataType,
                                           &CallSignature::reduceOp, &CallSignature::root};
  for (const auto field : fields) {
    for (std::int64_t delta = -2000; delta <= 2000; ++delta) {
      if (delta == 0) continue;
      CallSignature other = base;
      other.*field += delta;
      const std::uint64_t otherToken = agreementToken(other);
      ASSERT_NE(otherToken, token)
          << "field " << (&(base.*field) - &base.sequence) << " + " << delta;
      ASSERT_NE(otherToken & kTagBits, token & kTagBits)
          << "field " << (&(base.*field) - &base.sequence) << " + " << delta;
    }
  }
}

TEST(AgreementToken, MergingKeepsACommonTokenAndOtherwiseDisagrees) {
  const std::uint64_t a =
      agreementToken(makeSignature(1, CollectiveKind::kBroadcast, 8, DataType::kInt64, -1, 0));
  const std::uint64_t b =
      agreementToken(makeSignature(1, CollectiveKind::kBroadcast, 8, DataType::kInt64, -1, 1));
  EXPECT_EQ(mergeTokens(a, a), a);
  EXPECT_EQ(mergeTokens(a, b), kDisagreement);
  EXPECT_EQ(mergeTokens(mergeTokens(a, b), a), kDisagreement);
}

}  // namespace
}  // namespace ringtrain::collectives
