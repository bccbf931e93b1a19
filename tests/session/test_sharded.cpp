// The sharded activation phase without MPI: R threads, each with its own session, exchange
// through an in-process Comm (the shape of ptq::mpi_comm). The record equals the one-process
// run's for every R, batch count (also fewer batches than ranks) and algorithm; a rank that
// fails makes every rank fail with its error.
#include <catch2/catch.hpp>

#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "ptq/config.hpp"
#include "ptq/session/record.hpp"
#include "ptq/session/shard_exchange.hpp"

#include "../support/test_layers.hpp"

namespace {

/// The meeting point of R threads: gather and broadcast over shared slots and a barrier.
class thread_group {
 public:
  explicit thread_group(std::size_t n) : slots_(n) {}

  void barrier() {
    std::unique_lock<std::mutex> lock(m_);
    const std::size_t gen = generation_;
    if (++arrived_ == slots_.size()) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != gen; });
  }

  std::vector<std::string> slots_;

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::size_t arrived_ = 0;
  std::size_t generation_ = 0;
};

struct thread_comm {
  thread_group* group;
  std::size_t r;

  std::size_t rank() const { return r; }
  std::size_t size() const { return group->slots_.size(); }
  std::vector<std::string> gather(std::string_view mine) {
    group->slots_[r] = std::string(mine);
    group->barrier();
    std::vector<std::string> all;
    if (r == 0)
      all = group->slots_;
    group->barrier();
    return all;
  }
  std::string broadcast(std::string_view value) {
    if (r == 0)
      group->slots_[0] = std::string(value);
    group->barrier();
    std::string out = group->slots_[0];
    group->barrier();
    return out;
  }
};

ptq::amct_config cfg(const std::string& text) {
  auto r = ptq::try_parse_config(text);
  REQUIRE(r.ok());
  return r.value();
}

// A conv [4, 2, 3, 3] and a Linear [3, 8], inputs of fixed shapes.
std::vector<ptq_test::test_layer> layers() {
  ptq_test::test_layer conv;
  conv.name = "conv";
  conv.type = ptq::layer_type::conv2d;
  conv.weight = xt::xarray<float>::from_shape({4, 2, 3, 3});
  for (std::size_t i = 0; i < conv.weight.size(); ++i)
    conv.weight.data()[i] = std::sin(static_cast<float>(i) * 0.37f);
  ptq_test::test_layer fc;
  fc.name = "fc";
  fc.type = ptq::layer_type::linear;
  fc.weight = xt::xarray<float>::from_shape({3, 8});
  for (std::size_t i = 0; i < fc.weight.size(); ++i)
    fc.weight.data()[i] = std::cos(static_cast<float>(i) * 0.71f);
  return {conv, fc};
}

xt::xarray<float> batch(const std::string& layer, std::size_t b) {
  xt::xarray<float> x = xt::xarray<float>::from_shape(
      layer == "conv" ? std::vector<std::size_t>{2, 2, 9, 9} : std::vector<std::size_t>{5, 8});
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float t = static_cast<float>(i) * 0.13f + static_cast<float>(b) * 1.7f;
    x.data()[i] = std::sin(t) * (1.0f + static_cast<float>(b)) + 0.25f * std::cos(3.1f * t);
  }
  return x;
}

std::string one_process(const std::string& text) {
  auto made = ptq_test::create(cfg(text), layers());
  REQUIRE(made.ok());
  auto s = std::move(made).value();
  for (const auto& name : s.dmq_layers())
    REQUIRE(s.feed_dmq(name, ptq::as_tensor_view(batch(name, 0))).ok());
  REQUIRE(s.quantize_weights().ok());
  for (std::size_t b = 0; b < s.plan().batch_num; ++b) {
    for (const char* name : {"conv", "fc"})
      REQUIRE(s.feed(name, ptq::as_tensor_view(batch(name, b))).ok());
  }
  auto rec = s.record();
  REQUIRE(rec.ok());
  return ptq::write_record(rec.value());
}

/// What one rank of `ranks` does; `bad_rank` feeds a NaN in its first batch. Returns its
/// record text, or its error's message and note.
std::string run_rank(const std::string& text, std::size_t r, std::size_t ranks, thread_group& group,
                     std::size_t bad_rank) {
  ptq::session_options opt;
  opt.activation = {ptq::activation_mode::kind::sharded, {r, ranks}};
  auto made = ptq_test::create(cfg(text), layers(), opt);
  if (!made)
    return "create failed";
  auto s = std::move(made).value();
  thread_comm comm{&group, r};
  for (const auto& name : s.dmq_layers()) {  // every rank: the factors from batch 0
    if (!s.feed_dmq(name, ptq::as_tensor_view(batch(name, 0))))
      return "feed_dmq failed";
  }
  if (!s.quantize_weights())
    return "quantize_weights failed";
  const std::size_t own = ptq::shard_batch_count(opt.activation.shard, s.plan().batch_num);
  for (int pass = 1; pass <= 2; ++pass) {
    ptq::result<> local;
    for (std::size_t i = 0; i < own && local; ++i) {
      for (const char* name : {"conv", "fc"}) {
        auto x = batch(name, r + i * ranks);
        if (r == bad_rank && pass == 1 && i == 0)
          x.data()[3] = std::numeric_limits<float>::quiet_NaN();
        if (local)
          local = s.feed(name, ptq::as_tensor_view(x));
      }
    }
    if (auto st = ptq::exchange_shard_states(s, comm, local); !st)
      return st.error().message + " | " + st.error().note;
  }
  auto rec = s.record();
  if (!rec)
    return rec.error().message;
  return ptq::write_record(rec.value());
}

std::vector<std::string> run_shards(const std::string& text, std::size_t ranks,
                                    std::size_t bad_rank = static_cast<std::size_t>(-1)) {
  thread_group group(ranks);
  std::vector<std::string> out(ranks);
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] { out[r] = run_rank(text, r, ranks, group, bad_rank); });
  for (auto& t : threads)
    t.join();
  return out;
}

}  // namespace

TEST_CASE("shard_batch_count: round robin, ranks without batches", "[session][shard]") {
  CHECK(ptq::shard_batch_count({0, 3}, 7) == 3);  // 0 3 6
  CHECK(ptq::shard_batch_count({1, 3}, 7) == 2);  // 1 4
  CHECK(ptq::shard_batch_count({2, 3}, 7) == 2);  // 2 5
  CHECK(ptq::shard_batch_count({0, 3}, 1) == 1);
  CHECK(ptq::shard_batch_count({1, 3}, 1) == 0);
  CHECK(ptq::shard_batch_count({2, 3}, 2) == 0);
  CHECK(ptq::shard_batch_count({0, 1}, 5) == 5);
}

TEST_CASE("a sharded session gives the one-process record on every rank", "[session][shard]") {
  const char* ifmr =
      "ifmr_quantize { search_range_start: 0.7 search_range_end: 1.3 search_step: 0.01 "
      "max_percentile: 0.999 min_percentile: 0.999 asymmetric: true }";
  const char* hfmg = "hfmg_quantize { num_of_bins: 4096 asymmetric: true }";
  for (const char* algo : {ifmr, hfmg}) {
    for (std::size_t batch_num : {std::size_t{1}, std::size_t{2}, std::size_t{5}}) {
      const std::string text = "batch_num: " + std::to_string(batch_num) +
                               " common_config { arq_quantize { channel_wise: true } " + algo +
                               " dmq_balancer { migration_strength: 0.5 } }";
      const std::string want = one_process(text);
      for (std::size_t ranks : {std::size_t{1}, std::size_t{2}, std::size_t{3}}) {
        INFO(algo << " batch_num " << batch_num << ", " << ranks << " rank(s)");
        for (const auto& got : run_shards(text, ranks))
          CHECK(got == want);
      }
    }
  }
}

TEST_CASE("a rank that fails makes every rank fail with its error", "[session][shard]") {
  const std::string text = "batch_num: 4";
  for (const auto& got : run_shards(text, 3, 1)) {
    CHECK(got.find("NaN") != std::string::npos);
    CHECK(got.find("on rank 1 of 3") != std::string::npos);
  }
}

TEST_CASE("sharded session misuse is a clear error", "[session][shard][errors]") {
  ptq::session_options opt;
  opt.activation = {ptq::activation_mode::kind::sharded, {3, 3}};
  auto bad = ptq_test::create(cfg(""), layers(), opt);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == ptq::errc::shard_invalid);
  CHECK(bad.error().message == "session_options::activation: rank 3 of 3 ranks");

  opt.activation = {ptq::activation_mode::kind::sharded, {1, 2}};
  auto made = ptq_test::create(cfg("batch_num: 1"), layers(), opt);
  REQUIRE(made.ok());
  auto s = std::move(made).value();
  REQUIRE(s.quantize_weights().ok());
  const auto none = s.feed("conv", ptq::as_tensor_view(batch("conv", 0)));
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message == "conv: rank 1 of 2 has none of the 1 batch(es)");

  auto plain = ptq_test::create(cfg(""), layers());
  REQUIRE(plain.ok());
  const auto not_sharded = plain.value().shard_states();
  REQUIRE_FALSE(not_sharded.ok());
  CHECK(not_sharded.error().message ==
        "shard_states: the session is not sharded (session_options::activation is not "
        "activation_mode::kind::sharded)");

  opt.activation = {ptq::activation_mode::kind::sharded, {0, 2}};
  auto two = ptq_test::create(cfg("batch_num: 4"), layers(), opt);
  REQUIRE(two.ok());
  auto t = std::move(two).value();
  REQUIRE(t.quantize_weights().ok());
  REQUIRE(t.feed("conv", ptq::as_tensor_view(batch("conv", 0))).ok());
  const auto early = t.shard_states();
  REQUIRE_FALSE(early.ok());
  CHECK(early.error().message ==
        "exchange after pass 1: layer 'conv' was fed 1 of this rank's 2 batch(es)");
  REQUIRE(t.feed("conv", ptq::as_tensor_view(batch("conv", 2))).ok());
  const auto third = t.feed("conv", ptq::as_tensor_view(batch("conv", 0)));
  REQUIRE_FALSE(third.ok());
  CHECK(third.error().message ==
        "conv: this rank fed its 2 batch(es) of pass 1; exchange the states "
        "(exchange_shard_states) before pass 2");
  // States of another session (another rank count) are refused by the merge.
  const auto wrong = t.merge_shard_states({"x", "y", "z"});
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().code == ptq::errc::shard_invalid);
}

TEST_CASE("a rank's status frame carries its bytes or its error, checked", "[session][shard]") {
  std::size_t rank = 9;
  const auto ok = ptq::detail::decode_shard_status(
      ptq::detail::encode_shard_status(std::string("abc"), 2), 2, rank);
  REQUIRE(ok.ok());
  CHECK(ok.value() == "abc");
  CHECK(rank == 2);
  ptq::error e = ptq::make_error(ptq::errc::tensor_not_found, "no tensor 'fc'", "a note");
  e.path = "b1.safetensors";
  const auto bad = ptq::detail::decode_shard_status(
      ptq::detail::encode_shard_status(ptq::result<std::string>(e), 1), 0, rank);
  REQUIRE_FALSE(bad.ok());
  CHECK(rank == 1);
  CHECK(bad.error().code == ptq::errc::tensor_not_found);
  CHECK(bad.error().message == "no tensor 'fc'");
  CHECK(bad.error().note == "a note");
  CHECK(bad.error().path == "b1.safetensors");
  // An error frame without a message is not one a rank sends.
  const auto empty = ptq::detail::decode_shard_status(
      ptq::detail::encode_shard_status(
          ptq::result<std::string>(ptq::make_error(ptq::errc::tensor_not_found, "")), 1),
      0, rank);
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.error().code == ptq::errc::state_invalid);
  const auto cut = ptq::detail::decode_shard_status("PTQS", 0, rank);
  REQUIRE_FALSE(cut.ok());
  CHECK(cut.error().code == ptq::errc::state_truncated);
}
