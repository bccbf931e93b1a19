// A new activation algorithm is one policy (docs/architecture.md, Adding an activation
// algorithm): `absmax` below, scale = max|x| / 127, written only against the policy interface,
// runs through every mode the library has for an activation without a line changed elsewhere:
// one pass (layer_calibrator), two passes (two_pass_observer), two passes sharded over states
// merged from their frames, and over a Comm (observe_sharded). Every mode gives the hand-derived
// result, bit for bit.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ptq/algorithms/layer_calibrator.hpp"
#include "ptq/algorithms/scale_out/two_pass_exchange.hpp"
#include "ptq/algorithms/scale_out/two_pass_observer.hpp"
#include "ptq/core/wire.hpp"
#include "sharded_two_pass.hpp"

namespace toy {

struct absmax_settings {
  unsigned threads = 1;  // set by layer_calibrator::from_plan; unused here
};

/// Pass 1 (and the one-pass observer's state): the largest |x| so far and the batches seen.
struct absmax_state {
  float absmax = 0.0f;
  std::uint64_t batches = 0;
};
/// Pass 2: pass 1's maximum, checked against every batch again.
struct absmax_check {
  float absmax = 0.0f;
  std::uint64_t expected = 0;
  std::uint64_t batches = 0;
};

[[nodiscard]] ptq::activation_quant_result result_of(float absmax) {
  const float scale = absmax / 127.0f;
  return {scale, 0, 8, -127.0f * scale, 127.0f * scale};
}

[[nodiscard]] float absmax_of(const float* x, std::size_t n) {
  float m = 0.0f;
  for (std::size_t i = 0; i < n; ++i)
    m = std::max(m, std::fabs(x[i]));
  return m;
}

// The frames: found by serialize_state through argument-dependent lookup.
[[nodiscard]] std::string serialize(const absmax_state& st) {
  ptq::wire_writer w;
  w.f32(st.absmax);
  w.u64(st.batches);
  return w.out;
}
[[nodiscard]] std::string serialize(const absmax_check& st) {
  ptq::wire_writer w;
  w.f32(st.absmax);
  w.u64(st.expected);
  w.u64(st.batches);
  return w.out;
}

class absmax_observer {
 public:
  absmax_observer(absmax_settings, const ptq::kernels::kernel_set&, std::string name)
      : name_(std::move(name)) {}
  [[nodiscard]] ptq::result<> observe(const float* x, std::size_t n) {
    if (n == 0)
      return ptq::make_error(ptq::errc::no_data, name_ + ": empty batch");
    st_.absmax = std::max(st_.absmax, absmax_of(x, n));
    ++st_.batches;
    return {};
  }
  [[nodiscard]] ptq::result<ptq::activation_quant_result> finalize() const {
    return result_of(st_.absmax);
  }

 private:
  std::string name_;
  absmax_state st_;
};

/// The policy: settings, observer, the two passes' states and the functions on them.
struct absmax {
  using settings = absmax_settings;
  using observer = absmax_observer;
  using first_pass = absmax_state;
  using second_pass = absmax_check;

  [[nodiscard]] static settings from_plan(const ptq::resolved_layer&) noexcept { return {}; }
  [[nodiscard]] static ptq::result<first_pass> begin(const settings&, std::uint64_t) {
    return first_pass{};
  }
  [[nodiscard]] static ptq::result<> observe(first_pass& st, std::size_t, const float* x,
                                             std::size_t n, const settings&,
                                             const ptq::kernels::kernel_set&, const std::string&) {
    st.absmax = std::max(st.absmax, absmax_of(x, n));
    ++st.batches;
    return {};
  }
  [[nodiscard]] static ptq::result<> observe(second_pass& st, std::size_t batch, const float* x,
                                             std::size_t n, const settings&,
                                             const ptq::kernels::kernel_set&,
                                             const std::string& name) {
    if (absmax_of(x, n) > st.absmax) {
      return ptq::make_error(
          ptq::errc::state_mismatch,
          name + " batch " + std::to_string(batch + 1) + ": changed between the passes");
    }
    ++st.batches;
    return {};
  }
  [[nodiscard]] static ptq::result<second_pass> next_pass(const first_pass& st, const settings&) {
    return second_pass{st.absmax, st.batches, 0};
  }
  [[nodiscard]] static ptq::result<ptq::activation_quant_result> finalize(
      const second_pass& st, const settings&, const ptq::kernels::kernel_set&) {
    if (st.batches != st.expected)
      return ptq::make_error(ptq::errc::no_data, "absmax: pass 2 missed batches");
    return result_of(st.absmax);
  }
  [[nodiscard]] static ptq::result<> merge(first_pass& st, const first_pass& other,
                                           const ptq::kernels::kernel_set&) {
    st.absmax = std::max(st.absmax, other.absmax);
    st.batches += other.batches;
    return {};
  }
  [[nodiscard]] static ptq::result<> merge(second_pass& st, const second_pass& other,
                                           const ptq::kernels::kernel_set&) {
    st.batches += other.batches;
    return {};
  }
  [[nodiscard]] static ptq::result<first_pass> read_first_pass(std::string_view bytes,
                                                               std::string_view what,
                                                               const ptq::kernels::kernel_set&) {
    ptq::wire_reader r(bytes);
    first_pass st{r.f32(), r.u64()};
    if (r.failed() || !r.at_end())
      return ptq::make_error(ptq::errc::state_truncated, std::string(what) + ": not absmax");
    return st;
  }
  [[nodiscard]] static ptq::result<second_pass> read_second_pass(std::string_view bytes,
                                                                 std::string_view what,
                                                                 const ptq::kernels::kernel_set&) {
    ptq::wire_reader r(bytes);
    second_pass st;
    st.absmax = r.f32();
    st.expected = r.u64();
    st.batches = r.u64();
    if (r.failed() || !r.at_end())
      return ptq::make_error(ptq::errc::state_truncated, std::string(what) + ": not absmax");
    return st;
  }
};

/// A Comm of one rank (the shape of ptq::mpi_comm, core/shard_reduce.hpp).
struct single_rank_comm {
  [[nodiscard]] std::size_t rank() const { return 0; }
  [[nodiscard]] std::size_t size() const { return 1; }
  [[nodiscard]] std::vector<std::string> gather(std::string_view mine) {
    return {std::string(mine)};
  }
  [[nodiscard]] std::string broadcast(std::string_view value) { return std::string(value); }
};

}  // namespace toy

namespace {

bool same_bits(const ptq::activation_quant_result& a, const ptq::activation_quant_result& b) {
  return a.scale == b.scale && a.offset == b.offset && a.bits == b.bits &&
         a.clip_min == b.clip_min && a.clip_max == b.clip_max;
}

}  // namespace

TEST_CASE("a toy activation policy runs through every mode", "[two_pass][policy]") {
  const ptq_test::batches_t batches = {{0.5f, -2.0f, 1.0f}, {3.0f, -1.0f}, {-6.35f, 2.0f, 0.0f}};
  const auto want = toy::result_of(6.35f);  // max |x| = 6.35: scale 0.05
  const auto& k = ptq::kernels::default_kernels();

  // One pass: the policy's observer behind layer_calibrator.
  ptq::layer_calibrator<ptq::arq, toy::absmax> one(ptq::arq_settings{}, toy::absmax_settings{});
  for (const auto& b : batches)
    REQUIRE(one.observe(b.data(), b.size()).ok());
  auto r1 = one.finalize();
  REQUIRE(r1.ok());
  CHECK(same_bits(r1.value(), want));

  // Two passes (the bounded mode).
  ptq::two_pass_observer<toy::absmax> two(toy::absmax_settings{}, k, "toy input");
  REQUIRE(two.begin(8).ok());
  for (int pass = 1; pass <= 2; ++pass) {
    for (std::size_t b = 0; b < batches.size(); ++b)
      REQUIRE(two.observe(b, batches[b].data(), batches[b].size()).ok());
    if (pass == 1)
      REQUIRE(two.next_pass().ok());
  }
  auto r2 = two.finalize();
  REQUIRE(r2.ok());
  CHECK(same_bits(r2.value(), want));

  // Sharded: per-shard states through their frames, merged (1-3 shards, both orders).
  for (std::size_t shards = 1; shards <= 3; ++shards) {
    for (const bool reverse : {false, true}) {
      auto r = ptq_test::run_sharded_policy<toy::absmax>({}, batches, shards, reverse, k);
      REQUIRE(r.ok());
      CHECK(same_bits(r.value(), want));
    }
  }

  // Sharded over a Comm, as `ptq observe --mpi` runs it.
  toy::single_rank_comm comm;
  ptq::two_pass_observer<toy::absmax> o(toy::absmax_settings{}, k, "toy input");
  const auto feed = [&](ptq::two_pass_observer<toy::absmax>& obs) -> ptq::result<> {
    for (std::size_t b = 0; b < batches.size(); ++b) {
      if (auto st = obs.observe(b, batches[b].data(), batches[b].size()); !st)
        return st;
    }
    return {};
  };
  auto r3 = ptq::observe_sharded(o, comm, 8, feed, k);
  REQUIRE(r3.ok());
  CHECK(same_bits(r3.value(), want));

  // The policy's own errors come through the observer, named.
  ptq::two_pass_observer<toy::absmax> changed(toy::absmax_settings{}, k, "toy input");
  REQUIRE(changed.begin(8).ok());
  REQUIRE(changed.observe(0, batches[0].data(), batches[0].size()).ok());
  REQUIRE(changed.next_pass().ok());
  const auto e = changed.observe(0, batches[2].data(), batches[2].size());
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().message == "toy input batch 1: changed between the passes");
  CHECK(changed.finalize().error().message == "toy input: absmax: pass 2 missed batches");
}
