// An inference engine that calibrates under MPI (docs/scale-out.md): every rank runs the digits
// CNN (examples/digits) on its own calibration batches and feeds the session; the activation
// states meet on rank 0 after each pass. Rank 0 prints the record, which is the one-process
// record byte for byte (`ptq_example_digits` prints the same).
//   mpirun -np 3 ptq_example_mpi [DIGITS_DIR] [CONFIG]
#include <cstddef>
#include <iostream>
#include <string>

#include "digits_pipeline.hpp"
#include "ptq/config.hpp"
#include "ptq/mpi.hpp"
#include "ptq/session/shard_exchange.hpp"

namespace {

constexpr std::size_t batch_size = 32;

/// This rank's calibration; an error of any rank comes back from the exchanges on every rank.
ptq::result<ptq::record_file> calibrate(const ptq::amct_config& config,
                                        const digits::digits_data& data, ptq::mpi_comm& comm) {
  std::vector<ptq::layer_desc> descs;
  for (const auto& m : data.model.layers)
    descs.push_back(m.desc);
  ptq::session_options options;
  options.activation = {ptq::activation_mode::kind::sharded, {comm.rank(), comm.size()}};
  auto created = ptq::calibration_session::create(config, descs, options);
  if (!created)
    return created.error();
  auto s = std::move(created).value();
  // Phases 2 and 3 on every rank alike: the DMQ factors from batch 0, then the weights.
  ptq::result<> local =
      ptq::sequential_dmq(s, data.model, ptq::batch_rows(data.calib, 0, batch_size), 1);
  if (local)
    local = s.quantize_weights();
  if (local && !s.ada_layers().empty()) {
    local = ptq::make_error(ptq::errc::session_input_invalid,
                            "this example runs ARQ configs; see examples/digits for AdaRound");
  }
  // Phase 4: this rank's batches (global batch rank + i·size), twice, with an exchange after
  // each pass. Every rank calls the exchange, with its error if it has one.
  const std::size_t own = ptq::shard_batch_count(options.activation.shard, s.plan().batch_num);
  for (int pass = 1; pass <= 2; ++pass) {
    for (std::size_t i = 0; i < own && local; ++i) {
      const std::size_t b = comm.rank() + i * comm.size();
      if ((b + 1) * batch_size > data.calib.shape[0]) {
        local = ptq::make_error(ptq::errc::session_input_invalid,
                                "batch " + std::to_string(b) + " is past the calibration images");
        break;
      }
      auto r = ptq::forward_sequential(
          data.model, ptq::session_descs(s),
          ptq::batch_rows(data.calib, b * batch_size, (b + 1) * batch_size), 1,
          [&](std::size_t l, ptq::io::float_tensor& x) {
            const auto& layer = s.layers()[l];
            if (layer.plan.quant_enable) {
              if (auto st = s.feed(layer.desc.name, ptq::batch_view(x, layer.desc.name + " input"));
                  !st)
                return st;
            }
            return ptq::divide_by_balance_factors(layer, x.data.data(), x.shape);
          });
      if (!r)
        local = r.error();
    }
    if (auto st = ptq::exchange_shard_states(s, comm, local); !st)
      return st.error();
  }
  return s.record();
}

}  // namespace

int main(int argc, char** argv) {
  const ptq::mpi_environment mpi(argc, argv);
  ptq::mpi_comm comm;
  const std::string dir = argc > 1 ? argv[1] : "examples/digits";
  const std::string config_path = argc > 2 ? argv[2] : dir + "/../configs/quant.cfg";
  // Every rank reads the same files; a failure here is the same on every rank, so each rank
  // ends alone and rank 0 says why.
  auto read = ptq::try_read_text_file(config_path);
  const auto config =
      read ? ptq::try_parse_config(read.value()) : ptq::result<ptq::amct_config>(read.error());
  digits::digits_data data;
  std::string error;
  if (!config || !digits::load_digits(dir, data, error)) {
    if (comm.rank() == 0) {
      if (!read) {
        std::cerr << ptq::format_error(read.error());
      } else {
        std::cerr << ptq::format_diagnostics(config.diagnostics(), read.value(), config_path)
                  << error << '\n';
      }
    }
    return 1;
  }
  auto record = calibrate(config.value(), data, comm);
  if (!record) {
    if (comm.rank() == 0)
      std::cerr << ptq::format_error(record.error());
    return 1;
  }
  if (comm.rank() == 0) {
    std::cout << ptq::write_record(record.value());
    std::cout << "# calibrated on " << comm.size() << " rank(s)\n";
  }
  return 0;
}
