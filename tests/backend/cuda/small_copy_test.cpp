// The small copies of a decode step's boundary (backend/memory.h): up to 64 aligned bytes go
// between device buffers, into the device (Upload) and out to the host (Readback) as one-block
// kernels instead of copy-engine transfers; larger or unaligned ones stay transfers. Each case
// checks the bytes, the order against the kernels around it (a copy reads what the op before it
// wrote, and an Upload's host memory may be refilled at once) and the first word an Upload takes
// from the device. Runs on the GPU machine; where no CUDA device is present the tests report a skip.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "backend/memory.h"
#include "backend/ops.h"

namespace strata {
namespace {

namespace cuda = backend::cuda;

class SmallCopies : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device";
  }
};

std::vector<int32_t> iota_words(int64_t n, int32_t first) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

std::vector<int32_t> to_host_words(const Tensor& t) {
  std::vector<int32_t> v(static_cast<size_t>(t.numel()));
  backend::copy_to_host(t, v.data());
  return v;
}

// Device to device, at every size up to and past the kernel's 64 bytes, and at a byte count that
// is not whole words (a transfer).
TEST_F(SmallCopies, DeviceCopiesKeepEveryByte) {
  for (int64_t n : {1, 2, 7, 15, 16, 17, 64}) {
    backend::Buffer src(Device::kCuda, DType::kI32, {n}), dst(Device::kCuda, DType::kI32, {n});
    const std::vector<int32_t> want = iota_words(n, 1000 + static_cast<int32_t>(n));
    backend::copy_from_host(want.data(), src);
    backend::copy(src.view(), dst.view());
    EXPECT_EQ(to_host_words(dst), want) << n << " words";
  }
  backend::Buffer src(Device::kCuda, DType::kU8, {6}), dst(Device::kCuda, DType::kU8, {6});
  const unsigned char bytes[6] = {1, 2, 3, 4, 5, 6};
  backend::copy_from_host(bytes, src);
  backend::copy(src.view(), dst.view());
  unsigned char got[6] = {};
  backend::copy_to_host(dst, got);
  EXPECT_EQ(std::memcmp(got, bytes, 6), 0);
}

// A small copy queued right behind the op that writes its source reads the op's output, and the op
// after it reads the copy's (kernels may start early under PDL; each waits for its inputs).
TEST_F(SmallCopies, DeviceCopiesWaitForTheOpBefore) {
  const int64_t n = 16;
  backend::Buffer a(Device::kCuda, DType::kF32, {1, n}), b(Device::kCuda, DType::kF32, {1, n}),
      c(Device::kCuda, DType::kF32, {1, n}), out(Device::kCuda, DType::kI32, {1});
  std::vector<float> x(static_cast<size_t>(n));
  for (int round = 0; round < 20; ++round) {
    for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = i == (round % n) ? 5.0f : -1.0f * static_cast<float>(i);
    backend::copy_from_host(x.data(), a);
    backend::copy_from_host(x.data(), b);
    backend::add(b.view(), a.view());            // b = 2x, written by a kernel
    backend::copy(b.view(), c.view());           // a small copy kernel behind it
    backend::argmax(c.view(), out.view());       // reads the copy
    EXPECT_EQ(to_host_words(out)[0], round % n) << "round " << round;
  }
}

// An Upload of up to 64 bytes travels as a kernel parameter: the host memory may be refilled for the
// next start before the device has run the first. With a first word, dst[0] comes from the device.
TEST_F(SmallCopies, UploadsKeepTheirBytesAndTakeTheFirstWordFromTheDevice) {
  backend::Upload up(Device::kCuda);
  for (int64_t n : {2, 16, 40}) {  // 40 words: a transfer
    backend::Buffer d1(Device::kCuda, DType::kI32, {n}), d2(Device::kCuda, DType::kI32, {n}),
        token(Device::kCuda, DType::kI32, {1});
    const int32_t picked = 77 + static_cast<int32_t>(n);
    backend::copy_from_host(&picked, token);
    const std::vector<int32_t> w1 = iota_words(n, 10), w2 = iota_words(n, 500);
    std::memcpy(up.host(static_cast<size_t>(n) * 4), w1.data(), w1.size() * 4);
    up.start(d1);
    std::memcpy(up.host(static_cast<size_t>(n) * 4), w2.data(), w2.size() * 4);
    const Tensor& first = token.view();
    up.start(d2, &first);
    std::vector<int32_t> want2 = w2;
    want2[0] = picked;
    EXPECT_EQ(to_host_words(d1), w1) << n << " words";
    EXPECT_EQ(to_host_words(d2), want2) << n << " words";
  }
}

// A Readback of a small tensor, behind the op that wrote it, twice in a row from the same slot.
TEST_F(SmallCopies, ReadbacksReturnWhatTheOpWrote) {
  backend::Readback rb(Device::kCuda);
  for (int64_t n : {1, 16}) {
    backend::Buffer src(Device::kCuda, DType::kI32, {n}), dst(Device::kCuda, DType::kI32, {n});
    for (int round = 0; round < 3; ++round) {
      const std::vector<int32_t> want = iota_words(n, 100 * round + static_cast<int32_t>(n));
      backend::copy_from_host(want.data(), src);
      backend::copy(src.view(), dst.view());
      rb.start(dst);
      std::vector<int32_t> got(static_cast<size_t>(n));
      std::memcpy(got.data(), rb.wait(), got.size() * 4);
      EXPECT_EQ(got, want) << n << " words, round " << round;
    }
  }
}

}  // namespace
}  // namespace strata
