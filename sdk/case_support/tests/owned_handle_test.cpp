// OwnedHandle with a stand-in library (CPU only): destroy() reports the deleter's own status type and
// value, destroys once, and the destructor is the fallback for a handle never destroyed.
#include <gtest/gtest.h>

#include <type_traits>

#include "roofbench/case_support/owned_handle.hpp"

namespace roofbench::case_support {
namespace {

enum class FakeStatus { success = 0, busy = 7 };
struct FakeObject {};
using FakeHandle = FakeObject*;

int destroyed = 0;
FakeStatus fake_destroy(FakeHandle) {
  ++destroyed;
  return FakeStatus::busy;
}

using FakeOwned = OwnedHandle<FakeHandle, fake_destroy>;
static_assert(std::is_same_v<decltype(std::declval<FakeOwned&>().destroy()), FakeStatus>);

TEST(CaseSupportOwnedHandle, DestroyReturnsTheDeletersStatusOnce) {
  FakeObject object;
  destroyed = 0;
  {
    FakeOwned owned;
    EXPECT_EQ(owned.destroy(), FakeStatus::success);  // nothing to destroy
    *owned.replace() = &object;
    EXPECT_THROW(owned.replace(), Error);
    EXPECT_EQ(owned.get(), &object);
    EXPECT_EQ(owned.destroy(), FakeStatus::busy);
    EXPECT_EQ(owned.get(), nullptr);
    EXPECT_EQ(owned.destroy(), FakeStatus::success);
  }
  EXPECT_EQ(destroyed, 1);
  {
    FakeOwned owned;
    *owned.replace() = &object;
  }
  EXPECT_EQ(destroyed, 2);
}

}  // namespace
}  // namespace roofbench::case_support
