// `ptq observe --algo ifmr|hfmg [options] BATCH.npy...`: activation calibration of one tensor,
// one .npy per calibration batch. Prints {"scale", "offset", "clip_min", "clip_max"}.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "bounded_observe.hpp"
#include "command.hpp"
#include "mpi_run.hpp"
#include "numeric_io.hpp"

namespace {

struct observe_options {
  std::string algo = "ifmr";
  ptq::ifmr_settings ifmr{};
  std::size_t bins = 4096;
  int bits = 8;
  bool asymmetric = true;
  std::string candidates = "toolkit";
  bool fp16 = false;
  unsigned threads = 0;  // all cores: the results do not depend on the thread count
  std::string memory = "one-pass";
  bool order_invariant = false;
  bool mpi = false;
  std::vector<std::string> batches;
};

int print_result(ptq::activation_quant_result q, bool fp16) {
  if (fp16)
    q = ptq::with_fp16_scale(q);
  std::cout << "{\"scale\": " << ptq_cli::json_float(q.scale) << ", \"offset\": " << q.offset
            << ", \"clip_min\": " << ptq_cli::json_float(q.clip_min)
            << ", \"clip_max\": " << ptq_cli::json_float(q.clip_max) << "}\n";
  return ptq_cli::exit_ok;
}

/// `--mpi`: the batches sharded over the MPI ranks (docs/scale-out.md); rank 0 prints.
int run_observe_mpi(const ptq::activation_settings& s, const observe_options& o) {
  if (o.order_invariant) {
    std::cerr << "ptq observe: error: --mpi runs the two-pass states; --order-invariant is one "
                 "pass\n";
    return ptq_cli::exit_usage;
  }
#if PTQ_WITH_MPI
  const ptq::mpi_environment env;
  ptq::mpi_comm comm;
  const ptq_cli::silenced_streams quiet(comm.rank() != 0);
  auto r = ptq_cli::observe_mpi(s, o.batches, comm);
  if (!r)
    return ptq_cli::numeric_fail("observe", r.error());
  return comm.rank() == 0 ? print_result(r.value(), o.fp16) : ptq_cli::exit_ok;
#else
  (void)s;
  std::cerr << "ptq observe: " << ptq::format_error(ptq_cli::mpi_unavailable());
  return ptq_cli::exit_error;
#endif
}

int run_observe(const observe_options& o) {
  const std::string cmd = "observe";
  ptq::activation_settings s;
  s.algo = o.algo == "hfmg" ? ptq::activation_algo::hfmg : ptq::activation_algo::ifmr;
  s.ifmr = o.ifmr;
  s.ifmr.bits = o.bits;
  s.ifmr.asymmetric = o.asymmetric;
  s.ifmr.candidates =
      o.candidates == "inclusive" ? ptq::candidate_rule::inclusive : ptq::candidate_rule::toolkit;
  s.ifmr.threads = o.threads;
  s.hfmg.num_of_bins = o.bins;
  s.hfmg.bits = o.bits;
  s.hfmg.asymmetric = o.asymmetric;
  s.hfmg.threads = o.threads;
  if (o.mpi)
    return run_observe_mpi(s, o);
  ptq::activation_quant_result q;
  if (o.order_invariant) {
    if (s.algo != ptq::activation_algo::hfmg || o.memory == "bounded") {
      std::cerr << "ptq observe: error: --order-invariant needs --algo hfmg (and one pass)\n";
      return ptq_cli::exit_usage;
    }
    int code = ptq_cli::exit_error;
    auto r = ptq_cli::observe_order_invariant(s.hfmg, o.batches, cmd, code);
    if (!r)
      return code;
    q = r.value();
  } else if (ptq_cli::is_bounded(o.memory)) {
    int code = ptq_cli::exit_error;
    auto r = ptq_cli::observe_bounded(s, o.batches, cmd, code);
    if (!r)
      return code;
    q = r.value();
  } else {
    // Every batch is mapped first, so IFMR can reserve room at once for the batches it copies
    // (a mapped float32 batch is kept where it lies). float16 batches stay as they are stored:
    // the observer converts them a block at a time.
    std::vector<ptq::io::npy_view> mapped;
    std::size_t copied = 0;
    for (const auto& path : o.batches) {
      auto t = ptq_cli::load_tensor(path, cmd, ptq::io::npy_values::as_stored);
      if (!t)
        return ptq_cli::exit_error;
      if (!ptq::ifmr_observer::keeps_in_place(t->view()))
        copied += t->size();
      mapped.push_back(std::move(*t));
    }
    ptq::activation_observer obs(s, ptq_cli::numeric_kernels());
    obs.reserve(copied);
    for (std::size_t b = 0; b < mapped.size(); ++b) {
      auto st = obs.observe(mapped[b].view());
      if (!st)
        return ptq_cli::numeric_fail(cmd, st.error(), o.batches[b]);
    }
    auto r = obs.finalize();
    if (!r)
      return ptq_cli::numeric_fail(cmd, r.error());
    q = r.value();
  }
  return print_result(q, o.fp16);
}

}  // namespace

ptq_cli::command_def ptq_cli::observe_command() {
  return {
      "observe", "Calibrate one activation tensor (IFMR or HFMG) from .npy batches",
      [](CLI::App& sub) -> ptq_cli::run_fn {
        auto o = std::make_shared<observe_options>();
        sub.footer(
            ptq_cli::numeric_example("ptq observe --algo ifmr examples/numerics/conv2_input0.npy "
                                     "examples/numerics/conv2_input1.npy"));
        sub.add_option("--algo", o->algo, "activation algorithm")
            ->check(CLI::IsMember({"ifmr", "hfmg"}))
            ->capture_default_str();
        sub.add_option("--search-range-start", o->ifmr.search_range_start, "IFMR")
            ->capture_default_str();
        sub.add_option("--search-range-end", o->ifmr.search_range_end, "IFMR")
            ->capture_default_str();
        sub.add_option("--search-step", o->ifmr.search_step, "IFMR")->capture_default_str();
        sub.add_option("--max-percentile", o->ifmr.max_percentile, "IFMR")->capture_default_str();
        sub.add_option("--min-percentile", o->ifmr.min_percentile, "IFMR")->capture_default_str();
        sub.add_option("--num-of-bins", o->bins, "HFMG histogram bins")
            ->check(CLI::IsMember({1024, 2048, 4096, 8192}))
            ->capture_default_str();
        sub.add_option("--bits", o->bits, "activation bits (dst_type INT8 or INT16)")
            ->check(CLI::IsMember({8, 16}))
            ->capture_default_str();
        sub.add_flag("--asymmetric,!--symmetric", o->asymmetric,
                     "asymmetric (default, activation_offset) or symmetric quantization");
        sub.add_option("--candidates", o->candidates,
                       "IFMR candidate count: toolkit (float32 arange) or inclusive (end included)")
            ->check(CLI::IsMember({"toolkit", "inclusive"}))
            ->capture_default_str();
        sub.add_flag("--fp16-scale", o->fp16, "FORCE_FP16_QUANT: round scale_d through fp16");
        sub.add_option("--threads", o->threads,
                       "worker threads (0 = all cores; results are identical for any count)")
            ->capture_default_str();
        sub.add_option("--memory", o->memory,
                       "one-pass (IFMR keeps every value) or bounded (two passes over the files, "
                       "the same result)")
            ->check(CLI::IsMember({"one-pass", "bounded"}))
            ->capture_default_str();
        sub.add_flag("--order-invariant", o->order_invariant,
                     "HFMG on a histogram whose bins do not depend on the batch order or split "
                     "(power-of-two width; not the toolkit's numbers, docs/scale-out.md)");
        sub.add_flag("--mpi", o->mpi,
                     "shard the batches over the MPI ranks of mpirun (the same result; rank 0 "
                     "prints it; docs/scale-out.md)");
        sub.add_option("BATCH", o->batches, "one .npy per calibration batch")->required();
        return [o]() -> int { return run_observe(*o); };
      }};
}
