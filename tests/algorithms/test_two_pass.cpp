// The mergeable states and the bounded two-pass IFMR and HFMG: bit-identical to the one-pass
// observers for any batch sizes (blocks straddling batches), any visiting order, any number of
// shards and threads; the wire format's errors, exact; the simple min/max and absmax states.
// Also the observers on stored float16 batches, converted in blocks (at the end).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "ptq/algorithms/scale_out/state_wire.hpp"
#include "ptq/algorithms/scale_out/two_pass_observer.hpp"
#include "sharded_two_pass.hpp"

namespace {

using ptq_test::batches_t;

/// Batches whose sizes cut the 4096-element blocks everywhere: tiny ones, ones just under and
/// over a block, one spanning several blocks.
batches_t odd_batches(std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::student_t_distribution<float> d(3.0f);
  const std::size_t sizes[] = {1000, 3, 4095, 4097, 1, 12289, 700, 8192, 5000};
  batches_t out;
  for (const std::size_t n : sizes) {
    std::vector<float> b(n);
    for (auto& v : b)
      v = d(rng);
    out.push_back(std::move(b));
  }
  return out;
}

std::vector<float> concat(const batches_t& bs) {
  std::vector<float> all;
  for (const auto& b : bs)
    all.insert(all.end(), b.begin(), b.end());
  return all;
}

ptq::activation_settings ifmr_settings_for_test() {
  ptq::activation_settings s;
  s.algo = ptq::activation_algo::ifmr;
  s.ifmr.max_percentile = 0.999;  // k = 35 of 35377: the tails span several batches
  s.ifmr.min_percentile = 0.9995;
  return s;
}

ptq::activation_quant_result one_pass(const ptq::activation_settings& s, const batches_t& bs) {
  ptq::activation_observer o(s);
  for (const auto& b : bs)
    REQUIRE(o.observe(b.data(), b.size()).ok());
  auto r = o.finalize();
  REQUIRE(r.ok());
  return r.value();
}

bool same_bits(const ptq::activation_quant_result& a, const ptq::activation_quant_result& b) {
  return std::memcmp(&a.scale, &b.scale, sizeof(float)) == 0 && a.offset == b.offset &&
         std::memcmp(&a.clip_min, &b.clip_min, sizeof(float)) == 0 &&
         std::memcmp(&a.clip_max, &b.clip_max, sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("two-pass IFMR: the one-pass losses bit for bit, in any batch order", "[two_pass]") {
  const batches_t bs = odd_batches(7);
  const std::vector<float> all = concat(bs);
  auto s = ifmr_settings_for_test();
  auto ref = ptq::ifmr_run(all.data(), all.size(), s.ifmr);
  REQUIRE(ref.ok());
  auto tails = ptq::make_ifmr_tails(s.ifmr, all.size());
  REQUIRE(tails.ok());
  for (std::size_t b = bs.size(); b-- > 0;)
    REQUIRE(observe(tails.value(), b, bs[b].data(), bs[b].size(), ptq::kernels::default_kernels())
                .ok());
  auto plan = ptq::ifmr_plan_of(tails.value(), s.ifmr);
  REQUIRE(plan.ok());
  CHECK(plan.value().max0 == ref.value().max0);
  CHECK(plan.value().min0 == ref.value().min0);
  for (const unsigned threads : {1u, 3u}) {
    std::vector<std::size_t> order(bs.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::shuffle(order.begin(), order.end(), std::mt19937(threads));
    auto st = ptq::make_ifmr_losses(plan.value());
    for (const std::size_t b : order) {
      REQUIRE(observe(st, b, bs[b].data(), bs[b].size(), threads, ptq::kernels::default_kernels())
                  .ok());
    }
    CHECK(st.pending.empty());
    CHECK(st.pieces.empty());
    auto r = ptq::finalize(st, s.ifmr);
    REQUIRE(r.ok());
    CHECK(r.value().losses == ref.value().losses);  // every candidate's sum, exactly
    CHECK(r.value().best == ref.value().best);
    CHECK(same_bits(r.value().result, ref.value().result));
  }
}

TEST_CASE("two-pass IFMR and HFMG sharded over 1-4 states: the one-pass result", "[two_pass]") {
  const batches_t bs = odd_batches(11);
  auto si = ifmr_settings_for_test();
  ptq::activation_settings sh;
  sh.algo = ptq::activation_algo::hfmg;
  sh.hfmg.num_of_bins = 1024;
  for (const auto* s : {&si, &sh}) {
    const auto ref = one_pass(*s, bs);
    for (std::size_t shards = 1; shards <= 4; ++shards) {
      for (const bool reverse : {false, true}) {
        INFO("algo " << (s == &si ? "ifmr" : "hfmg") << " shards " << shards << " reverse "
                     << reverse);
        auto r = ptq_test::run_sharded(*s, bs, shards, reverse, ptq::kernels::default_kernels());
        REQUIRE(r.ok());
        CHECK(same_bits(r.value(), ref));
      }
    }
  }
}

TEST_CASE("two-pass HFMG: the sequential histogram bit for bit", "[two_pass]") {
  const batches_t bs = odd_batches(3);
  ptq::hfmg_settings s;
  s.num_of_bins = 2048;
  ptq::hfmg_observer seq(s);
  for (const auto& b : bs)
    REQUIRE(seq.observe(b).ok());
  ptq::hfmg_ranges_state r1;
  for (std::size_t b = 0; b < bs.size(); ++b)
    REQUIRE(observe(r1, b, bs[b].data(), bs[b].size(), ptq::kernels::default_kernels()).ok());
  auto st = ptq::make_hfmg_bins(r1, s);
  REQUIRE(st.ok());
  for (std::size_t b = bs.size(); b-- > 0;) {  // backwards: everything waits for batch 0
    REQUIRE(
        observe(st.value(), b, bs[b].data(), bs[b].size(), ptq::kernels::default_kernels()).ok());
  }
  CHECK(st.value().folded == bs.size());
  CHECK(st.value().merged.counts == seq.histogram().counts);
  CHECK(st.value().merged.lo == seq.histogram().lo);
  CHECK(st.value().merged.hi == seq.histogram().hi);
}

TEST_CASE("two_pass_observer reports misuse and changed batches", "[two_pass]") {
  const batches_t bs = odd_batches(5);
  auto s = ifmr_settings_for_test();
  ptq::two_pass_observer<ptq::ifmr> o(s.ifmr, ptq::kernels::default_kernels(), "conv1 input");
  CHECK(o.observe(0, bs[0].data(), bs[0].size()).error().message ==
        "conv1 input: observe before begin");
  REQUIRE(o.begin(concat(bs).size()).ok());
  for (std::size_t b = 0; b < bs.size(); ++b)
    REQUIRE(o.observe(b, bs[b].data(), bs[b].size()).ok());
  CHECK(o.observe(1, bs[1].data(), bs[1].size()).error().message ==
        "conv1 input: batch 2 was already observed");
  REQUIRE(o.next_pass().ok());
  const auto e = o.observe(2, bs[2].data(), bs[2].size() - 1).error();
  CHECK(e.code == ptq::errc::state_mismatch);
  CHECK(e.message ==
        "conv1 input batch 3: 4094 elements in pass 2, 4095 in pass 1 (the batch changed "
        "between passes)");
  CHECK(o.finalize().error().message == "conv1 input: IFMR: pass 2 summed 0 of 9 blocks");

  ptq::two_pass_observer<ptq::ifmr> few(s.ifmr);
  REQUIRE(few.begin(10).ok());
  const auto more = few.observe(0, bs[0].data(), bs[0].size()).error();
  CHECK(more.message == "activation batch 1: 1000 elements observed, more than the 10 announced");

  ptq::two_pass_observer<ptq::hfmg> ho(ptq::hfmg_settings{});
  REQUIRE(ho.begin(0).ok());
  REQUIRE(ho.observe(1, bs[1].data(), bs[1].size()).ok());
  CHECK(ho.next_pass().error().message == "activation: HFMG: pass 1 has no batch 1");
}

TEST_CASE("state wire format: round trip and exact errors", "[two_pass][wire]") {
  const batches_t bs = odd_batches(9);
  ptq::hfmg_ranges_state r1;
  for (std::size_t b = 0; b < bs.size(); ++b)
    REQUIRE(observe(r1, b, bs[b].data(), bs[b].size(), ptq::kernels::default_kernels()).ok());
  const std::string bytes = ptq::serialize(r1);
  REQUIRE(bytes.size() == 16 + 8 + 9 * 16 + 8);
  CHECK(bytes.substr(0, 4) == "PTQS");
  auto back = ptq::deserialize_hfmg_ranges(bytes, "rank 1");
  REQUIRE(back.ok());
  CHECK(ptq::serialize(back.value()) == bytes);

  // Every truncation is an error, never a crash.
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    auto t = ptq::deserialize_hfmg_ranges(bytes.substr(0, n), "rank 1");
    INFO(n);
    REQUIRE_FALSE(t.ok());
    CHECK((t.error().code == ptq::errc::state_truncated ||
           t.error().code == ptq::errc::state_checksum_mismatch));
  }
  CHECK(ptq::deserialize_hfmg_ranges(bytes.substr(0, 10), "rank 1").error().message ==
        "rank 1: truncated state: 10 bytes, the header alone is 16");
  CHECK(ptq::deserialize_hfmg_ranges(bytes.substr(0, 40), "rank 1").error().message ==
        "rank 1: truncated state: the header announces 152 payload bytes and a checksum, 24 "
        "bytes follow");

  std::string bad = bytes;
  bad[0] = 'X';
  CHECK(ptq::deserialize_hfmg_ranges(bad, "rank 1").error().message ==
        "rank 1: not a ptq state (bad magic, expected 'PTQS')");
  bad = bytes;
  bad[4] = 2;
  const auto v = ptq::deserialize_hfmg_ranges(bad, "rank 1").error();
  CHECK(v.code == ptq::errc::state_bad_version);
  CHECK(v.message == "rank 1: state format version 2, this build reads version 1");
  const auto kind = ptq::deserialize_ifmr_tails(bytes, "rank 1").error();
  CHECK(kind.code == ptq::errc::state_mismatch);
  CHECK(kind.message == "rank 1: state of kind 5, expected ifmr_tails (3)");
  bad = bytes;
  bad[40] ^= 1;
  const auto sum = ptq::deserialize_hfmg_ranges(bad, "rank 1").error();
  CHECK(sum.code == ptq::errc::state_checksum_mismatch);
  CHECK(sum.message == "rank 1: state checksum mismatch (corrupted)");
  CHECK(ptq::deserialize_hfmg_ranges(bytes + "x", "rank 1").error().message ==
        "rank 1: 1 bytes after the state's checksum");

  // A well-framed payload with an impossible value: min > max.
  ptq::wire_writer w;
  w.u64(1);
  w.u64(0);
  w.f32(2.0f);
  w.f32(1.0f);
  const auto inv =
      ptq::deserialize_hfmg_ranges(ptq::wire_frame(ptq::state_kind::hfmg_ranges, w.out), "r")
          .error();
  CHECK(inv.code == ptq::errc::state_invalid);
  CHECK(inv.message == "r: invalid state: batch ranges out of order, not finite or min > max");
}

TEST_CASE("every state kind round-trips through its wire format", "[two_pass][wire]") {
  const batches_t bs = odd_batches(13);
  const auto& k = ptq::kernels::default_kernels();
  ptq::minmax_state mm;
  REQUIRE(observe(mm, bs[0].data(), bs[0].size(), k).ok());
  auto mm2 = ptq::deserialize_minmax(ptq::serialize(mm));
  REQUIRE(mm2.ok());
  CHECK(mm2.value().lo == mm.lo);
  CHECK(mm2.value().count == 1000);

  auto s = ifmr_settings_for_test();
  auto tails = ptq::make_ifmr_tails(s.ifmr, concat(bs).size());
  REQUIRE(tails.ok());
  for (const std::size_t b : {std::size_t{4}, std::size_t{0}, std::size_t{2}})
    REQUIRE(observe(tails.value(), b, bs[b].data(), bs[b].size(), k).ok());
  const std::string tb = ptq::serialize(tails.value());
  auto t2 = ptq::deserialize_ifmr_tails(tb);
  REQUIRE(t2.ok());
  CHECK(ptq::serialize(t2.value()) == tb);

  // A pass-2 state with pending blocks and pieces of straddling blocks.
  for (std::size_t b = 0; b < bs.size(); ++b) {
    if (b != 4 && b != 0 && b != 2)
      REQUIRE(observe(tails.value(), b, bs[b].data(), bs[b].size(), k).ok());
  }
  auto plan = ptq::ifmr_plan_of(tails.value(), s.ifmr);
  REQUIRE(plan.ok());
  auto st = ptq::make_ifmr_losses(plan.value());
  for (const std::size_t b : {std::size_t{5}, std::size_t{2}, std::size_t{7}})
    REQUIRE(observe(st, b, bs[b].data(), bs[b].size(), 1, k).ok());
  CHECK_FALSE(st.pending.empty());
  CHECK_FALSE(st.pieces.empty());
  const std::string lb = ptq::serialize(st);
  auto l2 = ptq::deserialize_ifmr_losses(lb);
  REQUIRE(l2.ok());
  CHECK(ptq::serialize(l2.value()) == lb);

  ptq::hfmg_ranges_state r1;
  for (std::size_t b = 0; b < bs.size(); ++b)
    REQUIRE(observe(r1, b, bs[b].data(), bs[b].size(), k).ok());
  ptq::hfmg_settings hs;
  hs.num_of_bins = 1024;
  auto hb = ptq::make_hfmg_bins(r1, hs);
  REQUIRE(hb.ok());
  for (const std::size_t b : {std::size_t{0}, std::size_t{1}, std::size_t{5}})
    REQUIRE(observe(hb.value(), b, bs[b].data(), bs[b].size(), k).ok());
  const std::string hbytes = ptq::serialize(hb.value());
  auto h2 = ptq::deserialize_hfmg_bins(hbytes);
  REQUIRE(h2.ok());
  CHECK(ptq::serialize(h2.value()) == hbytes);

  // Overlapping states do not merge.
  auto again = ptq::make_hfmg_bins(r1, hs);
  REQUIRE(again.ok());
  REQUIRE(observe(again.value(), 5, bs[5].data(), bs[5].size(), k).ok());
  const auto both = merge(again.value(), hb.value()).error();
  CHECK(both.code == ptq::errc::state_mismatch);
  CHECK(both.message == "HFMG bins: batch 6 is in both states");
}

TEST_CASE("channel absmax state: the DMQ absmax of all batches, merged in any grouping",
          "[two_pass]") {
  const auto& k = ptq::kernels::default_kernels();
  std::vector<float> a = {1, -5, 2, 0.5f, -3, 4}, b = {-7, 1, 0, 2, 6, -1};
  const ptq::tensor_view ta = ptq::view_of(a.data(), {1, 3, 2}, "a");
  const ptq::tensor_view tb = ptq::view_of(b.data(), {1, 3, 2}, "b");
  ptq::channel_absmax_state one, x, y;
  REQUIRE(observe(one, ta, ptq::layer_type::conv2d, k).ok());
  REQUIRE(observe(one, tb, ptq::layer_type::conv2d, k).ok());
  CHECK(one.absmax == std::vector<float>{7, 2, 6});
  REQUIRE(observe(x, tb, ptq::layer_type::conv2d, k).ok());
  REQUIRE(observe(y, ta, ptq::layer_type::conv2d, k).ok());
  REQUIRE(merge(x, y).ok());
  CHECK(x.absmax == one.absmax);
  CHECK(x.batches == 2);
  auto back = ptq::deserialize_channel_absmax(ptq::serialize(x));
  REQUIRE(back.ok());
  CHECK(back.value().absmax == one.absmax);
  std::vector<float> c = {1, 2};
  const ptq::tensor_view tc = ptq::view_of(c.data(), {1, 2, 1}, "c");
  CHECK(observe(one, tc, ptq::layer_type::conv2d, k).error().message ==
        "c: 2 input channels, earlier batches had 3");
}

TEST_CASE("the state fuzzer's seeds: the good ones read, the bad ones give their codes",
          "[two_pass][wire]") {
  const std::string dir = std::string(PTQ_TEST_DATA_DIR) + "/../../fuzz/corpus/state_fuzzer/";
  const auto read = [&](const char* name) {
    std::ifstream in(dir + name, std::ios::binary);
    REQUIRE(in);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  CHECK(ptq::deserialize_minmax(read("minmax.bin")).ok());
  CHECK(ptq::deserialize_channel_absmax(read("channel_absmax.bin")).ok());
  CHECK(ptq::deserialize_ifmr_tails(read("ifmr_tails.bin")).ok());
  auto losses = ptq::deserialize_ifmr_losses(read("ifmr_losses.bin"));
  REQUIRE(losses.ok());
  CHECK(losses.value().pieces.size() == 1);
  CHECK(ptq::deserialize_hfmg_ranges(read("hfmg_ranges.bin")).ok());
  auto bins = ptq::deserialize_hfmg_bins(read("hfmg_bins.bin"));
  REQUIRE(bins.ok());
  CHECK(bins.value().pending.size() == 1);
  CHECK(ptq::deserialize_hfmg_ranges(read("bad_version.bin")).error().code ==
        ptq::errc::state_bad_version);
  CHECK(ptq::deserialize_hfmg_ranges(read("bad_truncated.bin")).error().code ==
        ptq::errc::state_truncated);
  CHECK(ptq::deserialize_hfmg_ranges(read("bad_checksum.bin")).error().code ==
        ptq::errc::state_checksum_mismatch);
  CHECK(ptq::deserialize_hfmg_ranges(read("bad_magic.bin")).error().code ==
        ptq::errc::state_bad_magic);
  const auto overlap = ptq::deserialize_ifmr_losses(read("bad_pieces_overlap.bin")).error();
  CHECK(overlap.code == ptq::errc::state_invalid);
  CHECK(overlap.message == "state: invalid state: IFMR losses: overlapping pieces of block 0");
}

// Tensor views (core/tensor_view.hpp): every binary16 value converts exactly, and the IFMR and
// HFMG observers given float16, bfloat16 or strided batches (converted a block at a time,
// view_blocks.hpp) give the results and errors of the same observers on the converted float32
// batches, bit for bit, for every thread count and for batches that end inside, on and just past
// a block.
namespace {

/// binary16 bits -> value, from the definition: (-1)^s · 2^(e-15) · (1 + m/1024), or
/// 2^-14 · m/1024 for e = 0.
double half_value(std::uint16_t h) {
  const int e = (h >> 10) & 0x1F;
  const int m = h & 0x3FF;
  const double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

/// Finite float16 values of a few magnitudes, as stored bytes.
std::vector<std::uint16_t> random_halves(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint16_t> h(n);
  for (auto& v : h) {
    do {
      v = static_cast<std::uint16_t>(rng());
    } while (((v >> 10) & 0x1F) == 0x1F || ((v >> 10) & 0x1F) < 8);
  }
  return h;
}

ptq::tensor_view as_stored(const std::vector<std::uint16_t>& h, ptq::dtype type = ptq::dtype::f16) {
  ptq::tensor_view v;
  v.data = h.data();
  v.type = type;
  v.shape = {h.size()};
  return v;
}

std::vector<float> converted(const std::vector<std::uint16_t>& h) {
  std::vector<float> f(h.size());
  for (std::size_t i = 0; i < h.size(); ++i)
    f[i] = ptq::half_to_float(h[i]);
  return f;
}

void check_same(const ptq::result<ptq::activation_quant_result>& a,
                const ptq::result<ptq::activation_quant_result>& b) {
  REQUIRE(a.ok() == b.ok());
  if (!a.ok()) {
    CHECK(a.error().code == b.error().code);
    CHECK(a.error().message == b.error().message);
    return;
  }
  CHECK(std::memcmp(&a.value().scale, &b.value().scale, sizeof(float)) == 0);
  CHECK(a.value().offset == b.value().offset);
  CHECK(std::memcmp(&a.value().clip_min, &b.value().clip_min, sizeof(float)) == 0);
  CHECK(std::memcmp(&a.value().clip_max, &b.value().clip_max, sizeof(float)) == 0);
}

}  // namespace

TEST_CASE("half_to_float: every binary16 value exactly", "[algorithms][stored]") {
  for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    const float f = ptq::half_to_float(h);
    const int e = (h >> 10) & 0x1F;
    CHECK(std::signbit(f) == ((h & 0x8000) != 0));
    if (e == 0x1F) {
      CHECK(std::isnan(f) == ((h & 0x3FF) != 0));
      CHECK(std::isinf(f) == ((h & 0x3FF) == 0));
    } else if (static_cast<double>(f) != half_value(h)) {
      FAIL("half 0x" << std::hex << bits << " -> " << f);
    }
  }
  // convert() of a run, at an offset, is the same value by value; float32 runs are copied.
  const std::vector<std::uint16_t> h{0x3C00, 0xC000, 0x0001, 0x7BFF, 0x8000};
  float out[3] = {};
  as_stored(h).convert(1, 3, out);
  CHECK(out[0] == -2.0F);
  CHECK(out[1] == 5.9604644775390625e-08F);
  CHECK(out[2] == 65504.0F);
  const float f32[] = {1.5F, -2.25F};
  const ptq::tensor_view s = ptq::view_of(f32, {2});
  CHECK(s.in_place() == f32);
  CHECK(as_stored(h).in_place() == nullptr);
  CHECK(s.at(1) == -2.25F);
}

TEST_CASE("observers on float16 batches: the results of the converted batches",
          "[algorithms][stored]") {
  const std::size_t block = ptq::conversion_block;
  const std::vector<std::vector<std::uint16_t>> batches{
      random_halves(2 * block + 12345, 1), random_halves(block, 2), random_halves(block + 1, 3),
      random_halves(77, 4)};
  for (const auto algo : {ptq::activation_algo::ifmr, ptq::activation_algo::hfmg}) {
    for (const unsigned threads : {1U, 2U, 3U}) {
      ptq::activation_settings s;
      s.algo = algo;
      s.ifmr.threads = threads;
      s.hfmg.threads = threads;
      ptq::activation_observer from_halves(s), from_floats(s);
      for (const auto& b : batches) {
        REQUIRE(from_halves.observe(as_stored(b)).ok());
        REQUIRE(from_floats.observe(converted(b)).ok());
      }
      INFO("algo " << static_cast<int>(algo) << ", threads " << threads);
      check_same(from_halves.finalize(), from_floats.finalize());
    }
  }
}

TEST_CASE("observers on bfloat16 and strided batches: the results of the converted batches",
          "[algorithms][stored]") {
  // A [rows, cols] batch of more than two blocks read transposed ([cols, rows], strides {1,
  // cols}), and its bits read as bfloat16; against the same values materialized as float32.
  const std::size_t rows = 1000, cols = 601;
  const auto h = random_halves(rows * cols, 11);
  const std::vector<float> x = converted(h);
  std::vector<float> xt(x.size());
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c)
      xt[c * rows + r] = x[r * cols + c];
  ptq::tensor_view transposed = ptq::view_of(x.data(), {cols, rows});
  transposed.strides = {1, static_cast<std::ptrdiff_t>(cols)};
  std::vector<float> bf(h.size());
  for (std::size_t i = 0; i < h.size(); ++i)
    bf[i] = ptq::bfloat16_to_float(h[i]);
  for (const auto algo : {ptq::activation_algo::ifmr, ptq::activation_algo::hfmg}) {
    for (const unsigned threads : {1U, 2U, 3U}) {
      ptq::activation_settings s;
      s.algo = algo;
      s.ifmr.threads = threads;
      s.hfmg.threads = threads;
      ptq::activation_observer from_view(s), from_floats(s), from_bf16(s), from_bf_floats(s);
      REQUIRE(from_view.observe(transposed).ok());
      REQUIRE(from_floats.observe(xt).ok());
      REQUIRE(from_bf16.observe(as_stored(h, ptq::dtype::bf16)).ok());
      REQUIRE(from_bf_floats.observe(bf).ok());
      INFO("algo " << static_cast<int>(algo) << ", threads " << threads);
      check_same(from_view.finalize(), from_floats.finalize());
      check_same(from_bf16.finalize(), from_bf_floats.finalize());
    }
  }
  // A NaN is named at its index in the view's C order, as in the materialized batch.
  std::vector<float> bad = x;
  bad[7 * cols + 3] = std::nanf("");
  ptq::tensor_view bad_t = transposed;
  bad_t.data = bad.data();
  ptq::activation_observer o(ptq::activation_settings{});
  const auto e = o.observe(bad_t);
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().message ==
        "activation batch 1: NaN at flat index " + std::to_string(3 * rows + 7));
  // A view it cannot read is E909, before anything is kept.
  bad_t.strides = {1};
  const auto e909 = o.observe(bad_t);
  REQUIRE_FALSE(e909.ok());
  CHECK(e909.error().code == ptq::errc::tensor_view_invalid);
  CHECK(e909.error().message ==
        "activation batch 1: 1 strides for a rank-2 shape (one per axis, or none for C order)");
}

TEST_CASE("observers on float16 batches: the errors of the converted batches",
          "[algorithms][stored]") {
  const std::size_t block = ptq::conversion_block;
  for (const auto algo : {ptq::activation_algo::ifmr, ptq::activation_algo::hfmg}) {
    ptq::activation_settings s;
    s.algo = algo;
    s.ifmr.threads = 2;
    s.hfmg.threads = 2;
    // A NaN in the third block, an -Inf after it: the NaN is named, at its flat index.
    auto bad = random_halves(3 * block, 5);
    bad[2 * block + 5] = 0x7E00;
    bad[2 * block + 9] = 0xFC00;
    ptq::activation_observer a(s), b(s);
    REQUIRE(a.observe(as_stored(random_halves(100, 6))).ok());
    REQUIRE(b.observe(converted(random_halves(100, 6))).ok());
    const auto ea = a.observe(as_stored(bad));
    const auto eb = b.observe(converted(bad));
    REQUIRE_FALSE(ea.ok());
    REQUIRE_FALSE(eb.ok());
    CHECK(ea.error().message == eb.error().message);
    CHECK(ea.error().message ==
          "activation batch 2: NaN at flat index " + std::to_string(2 * block + 5));
    // The failed batch is not kept: the next batch is batch 2 again, and the results agree.
    bad[2 * block + 5] = 0x3C00;
    bad[2 * block + 9] = 0x4000;
    REQUIRE(a.observe(as_stored(bad)).ok());
    REQUIRE(b.observe(converted(bad)).ok());
    check_same(a.finalize(), b.finalize());
    // An empty batch.
    const auto za = a.observe(as_stored({}));
    REQUIRE_FALSE(za.ok());
    CHECK(za.error().code == ptq::errc::empty_tensor);
    CHECK(za.error().message == "activation batch 3: empty tensor");
  }
}
