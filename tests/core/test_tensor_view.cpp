// The tensor view (core/tensor_view.hpp): layouts it reads, hand-derived; the 16-bit
// conversions exact; what it refuses, with E909 naming the view; which output buffers it takes.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ptq/core/tensor_view.hpp"

namespace {

std::vector<float> read(const ptq::tensor_view& v, std::size_t at, std::size_t n) {
  std::vector<float> out(n);
  v.convert(at, n, out.data());
  return out;
}

/// 0, 1, 2, ... n - 1.
std::vector<float> iota(std::size_t n) {
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i)
    x[i] = static_cast<float>(i);
  return x;
}

}  // namespace

TEST_CASE("tensor_view: C order is read where it lies", "[core][tensor_view]") {
  const auto x = iota(6);
  const ptq::tensor_view v = ptq::view_of(x.data(), {2, 3}, "x");
  CHECK(v.size() == 6);
  CHECK(v.rank() == 2);
  CHECK(v.contiguous());
  CHECK(v.in_place() == x.data());
  CHECK(read(v, 2, 3) == std::vector<float>{2, 3, 4});
  // Strides that are C order's (axes of extent 1 with any stride) are contiguous too.
  ptq::tensor_view c = v;
  c.strides = {3, 1};
  CHECK(c.contiguous());
  c.shape = {1, 2, 3};
  c.strides = {99, 3, 1};
  CHECK(c.contiguous());
  CHECK(c.in_place() == x.data());
}

TEST_CASE("tensor_view: strided layouts in C order of the view", "[core][tensor_view]") {
  const auto x = iota(12);  // memory [3, 4]: x[r][c] = 4r + c
  SECTION("transposed: [4, 3] with strides {1, 4}") {
    ptq::tensor_view t = ptq::view_of(x.data(), {4, 3});
    t.strides = {1, 4};
    CHECK_FALSE(t.contiguous());
    CHECK(t.in_place() == nullptr);
    CHECK(read(t, 0, 12) == std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
    CHECK(read(t, 4, 5) == std::vector<float>{5, 9, 2, 6, 10});  // across rows
    CHECK(t.at(11) == 11.0f);
  }
  SECTION("a slice: every other column, [3, 2] with strides {4, 2}") {
    ptq::tensor_view s = ptq::view_of(x.data() + 1, {3, 2});
    s.strides = {4, 2};
    CHECK(read(s, 0, 6) == std::vector<float>{1, 3, 5, 7, 9, 11});
  }
  SECTION("reversed rows: a negative stride") {
    ptq::tensor_view r = ptq::view_of(x.data() + 8, {3, 4});
    r.strides = {-4, 1};
    CHECK(read(r, 0, 12) == std::vector<float>{8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3});
  }
  SECTION("broadcast: a stride of 0 repeats a row") {
    ptq::tensor_view b = ptq::view_of(x.data(), {3, 4});
    b.strides = {0, 1};
    CHECK(read(b, 0, 12) == std::vector<float>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3});
  }
  SECTION("rank 1 and rank 0") {
    ptq::tensor_view one = ptq::view_of(x.data(), {4});
    one.strides = {3};
    CHECK(read(one, 1, 3) == std::vector<float>{3, 6, 9});
    const ptq::tensor_view scalar = ptq::view_of(x.data() + 5, {});
    CHECK(scalar.size() == 1);
    CHECK(scalar.at(0) == 5.0f);
    const ptq::tensor_view none;  // a default view is empty
    CHECK(none.size() == 0);
    CHECK(ptq::copy_values(none).empty());
    CHECK(ptq::check_tensor_view(none).ok());
  }
}

TEST_CASE("tensor_view: float16 and bfloat16, exactly", "[core][tensor_view]") {
  // bfloat16 is float32's upper half: every one of the 65536 patterns widens to itself.
  for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const float f = ptq::bfloat16_to_float(static_cast<std::uint16_t>(bits));
    std::uint32_t back = 0;
    std::memcpy(&back, &f, 4);
    if (back != bits << 16)
      FAIL("bfloat16 0x" << std::hex << bits);
  }
  // 1, -2, the smallest subnormal and the largest finite float16 / bfloat16 values.
  const std::vector<std::uint16_t> h{0x3C00, 0xC000, 0x0001, 0x7BFF};
  ptq::tensor_view v;
  v.data = h.data();
  v.type = ptq::dtype::f16;
  v.shape = {2, 2};
  CHECK(read(v, 0, 4) == std::vector<float>{1.0f, -2.0f, 5.9604644775390625e-08f, 65504.0f});
  CHECK(v.in_place() == nullptr);
  v.strides = {1, 2};  // transposed
  CHECK(read(v, 0, 4) == std::vector<float>{1.0f, 5.9604644775390625e-08f, -2.0f, 65504.0f});
  const std::vector<std::uint16_t> b{0x3F80, 0xC000, 0x0001, 0x7F7F};
  v.data = b.data();
  v.type = ptq::dtype::bf16;
  v.strides.clear();
  CHECK(read(v, 0, 4) == std::vector<float>{1.0f, -2.0f, 9.18354961579912115600575419705e-41f,
                                            3.38953138925153547590470800371e38f});
  CHECK(ptq::to_string(ptq::dtype::bf16) == "bfloat16");
  CHECK(ptq::dtype_size(ptq::dtype::f16) == 2);
}

TEST_CASE("tensor_view: float32 at an address a float may not have is converted",
          "[core][tensor_view]") {
  const float f[] = {1.5f, -2.25f};
  std::string bytes(9, '\0');
  std::memcpy(&bytes[1], f, 8);
  ptq::tensor_view v;
  v.data = &bytes[1];
  v.shape = {2};
  CHECK(v.contiguous());
  CHECK(v.in_place() == nullptr);
  CHECK(read(v, 0, 2) == std::vector<float>{1.5f, -2.25f});
}

TEST_CASE("check_tensor_view: what cannot be read is E909, naming the view",
          "[core][tensor_view]") {
  const auto x = iota(4);
  const auto problem = [](const ptq::tensor_view& v) {
    const auto st = ptq::check_tensor_view(v);
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().code == ptq::errc::tensor_view_invalid);
    return st.error().message;
  };
  ptq::tensor_view v = ptq::view_of(x.data(), {2, 2}, "conv1 input");
  CHECK(ptq::check_tensor_view(v).ok());
  v.strides = {2};
  CHECK(problem(v) ==
        "conv1 input: 1 strides for a rank-2 shape (one per axis, or none for C "
        "order)");
  v.strides.clear();
  v.data = nullptr;
  CHECK(problem(v) == "conv1 input: no data (null pointer) for 4 values");
  v.shape = {0, 2};  // an empty view needs no data
  CHECK(ptq::check_tensor_view(v).ok());
  const std::size_t big = std::size_t{1} << 40;
  v = ptq::view_of(x.data(), {big, big, big}, "huge");
  CHECK(problem(v) == "huge: its shape holds more values than memory can");
  v = ptq::view_of(x.data(), {2, 2}, "far");
  const auto max = std::numeric_limits<std::ptrdiff_t>::max();
  v.strides = {max / 2 + 1, max / 2 + 1};
  CHECK(problem(v) == "far: its strides reach beyond memory's address range");
  v.strides = {-(max / 2) - 1, max / 2 + 1};
  CHECK(problem(v) == "far: its strides reach beyond memory's address range");
}

TEST_CASE("check_output_buffer: the view's own float32 memory, or memory apart from it",
          "[core][tensor_view]") {
  std::vector<float> x = iota(8);
  std::vector<float> out(8);
  ptq::tensor_view v = ptq::view_of(x.data(), {2, 4}, "w");
  CHECK(ptq::check_output_buffer(v, x.data()).ok());    // in place
  CHECK(ptq::check_output_buffer(v, out.data()).ok());  // apart
  const auto refused = ptq::check_output_buffer(v, x.data() + 1);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ptq::errc::tensor_view_invalid);
  CHECK(refused.error().message ==
        "w: the output buffer overlaps the float32 values it is computed from; it may be their "
        "own memory only when they are float32 in C order");
  CHECK_FALSE(ptq::check_output_buffer(v, nullptr).ok());
  // A transposed view may not write over itself, not even from its first element.
  v.shape = {4, 2};
  v.strides = {1, 4};
  const auto strided = ptq::check_output_buffer(v, x.data());
  REQUIRE_FALSE(strided.ok());
  CHECK(strided.error().message.find("float32 strided values") != std::string::npos);
  // A reversed view reaches below its data pointer: memory just below it overlaps.
  ptq::tensor_view r = ptq::view_of(x.data() + 4, {2, 4}, "r");
  r.strides = {-4, 1};
  CHECK_FALSE(ptq::check_output_buffer(r, x.data()).ok());
  std::vector<float> below(16);
  ptq::tensor_view r2 = ptq::view_of(below.data() + 12, {2, 4}, "r2");
  r2.strides = {-4, 1};  // reads below[8, 16)
  CHECK(ptq::check_output_buffer(r2, below.data()).ok());
  CHECK_FALSE(ptq::check_output_buffer(r2, below.data() + 1).ok());
  // float16 values may not share memory with the float32 output at all.
  std::vector<std::uint16_t> h(16);
  ptq::tensor_view half;
  half.data = h.data();
  half.type = ptq::dtype::f16;
  half.shape = {8};
  CHECK_FALSE(ptq::check_output_buffer(half, reinterpret_cast<float*>(h.data())).ok());
}

TEST_CASE("float_values and copy_values: in place, or a C-order copy", "[core][tensor_view]") {
  const auto x = iota(6);
  std::vector<float> scratch;
  const ptq::tensor_view v = ptq::view_of(x.data(), {2, 3});
  CHECK(ptq::float_values(v, scratch) == x.data());
  CHECK(scratch.empty());
  ptq::tensor_view t = ptq::view_of(x.data(), {3, 2});
  t.strides = {1, 3};
  const float* p = ptq::float_values(t, scratch);
  CHECK(p == scratch.data());
  CHECK(scratch == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(ptq::copy_values(t) == scratch);
}
