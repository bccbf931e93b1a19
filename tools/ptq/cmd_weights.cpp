// `ptq weights --algo arq --type T [--groups G] [--bits N] [--channel-wise|--per-tensor] W.npy`:
// weight calibration. Prints {"scale_w": [...], "offset_w": [...]}.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "command.hpp"
#include "numeric_io.hpp"
#include "outputs.hpp"

namespace {

struct weights_options {
  std::string algo = "arq";
  std::string type;
  std::size_t groups = 1;
  int bits = 8;
  bool channel_wise = false;
  bool per_tensor = false;
  std::string fake_quant_out;
  std::string weight;
};

int run_weights(const weights_options& o) {
  ptq_cli::install_interrupt_cleanup("ptq weights");
  const std::string cmd = "weights";
  auto op = ptq_cli::parse_layer_type(o.type, cmd);
  if (!op)
    return ptq_cli::exit_error;
  if (!o.fake_quant_out.empty()) {  // before any work: not the input, a file we may write
    if (auto st = ptq_cli::check_outputs({{"--fake-quant-out", o.fake_quant_out}},
                                         {{"WEIGHT", o.weight}});
        !st)
      return ptq_cli::numeric_fail(cmd, st.error());
  }
  auto t = ptq_cli::load_tensor(o.weight, cmd, ptq::io::npy_values::as_stored);
  if (!t)
    return ptq_cli::exit_error;
  ptq::arq_settings s;
  s.bits = o.bits;
  // The type's default (CHANNEL_WISE_TYPES, ptq/core/layer_type.hpp): per channel except Linear.
  s.channel_wise = o.channel_wise || (!o.per_tensor && *op != ptq::layer_type::linear);
  ptq::tensor_view w = t->view();  // float16 is read where it lies
  w.name = o.weight;
  auto r = ptq::arq_calibrate(w, *op, o.groups, s, ptq_cli::numeric_kernels());
  if (!r)
    return ptq_cli::numeric_fail(cmd, r.error());
  if (!o.fake_quant_out.empty()) {
    std::vector<float> fq(w.size());
    auto st =
        ptq::arq_fake_quantize(w, *op, o.groups, r.value(), fq.data(), ptq_cli::numeric_kernels());
    if (!st)
      return ptq_cli::numeric_fail(cmd, st.error());
    const auto* bytes = reinterpret_cast<const char*>(fq.data());
    const ptq_cli::output_file out({"--fake-quant-out", o.fake_quant_out},
                                   ptq::io::npy_header_bytes(t->shape),
                                   {std::string_view(bytes, fq.size() * sizeof(float))}, nullptr);
    if (auto written = ptq_cli::commit_outputs({out}); !written)
      return ptq_cli::numeric_fail(cmd, written.error());
  }
  std::cout << "{\"scale_w\": " << ptq_cli::json_list(r.value().scale, ptq_cli::json_float)
            << ", \"offset_w\": "
            << ptq_cli::json_list(r.value().offset,
                                  [](std::int32_t v) { return std::to_string(v); })
            << "}\n";
  return ptq_cli::exit_ok;
}

}  // namespace

ptq_cli::command_def ptq_cli::weights_command() {
  return {
      "weights", "Calibrate one weight tensor (ARQ) from a .npy file",
      [](CLI::App& sub) -> ptq_cli::run_fn {
        auto o = std::make_shared<weights_options>();
        sub.footer(ptq_cli::numeric_example(
            "ptq weights --type Conv2d --bits 8 examples/numerics/conv2_weight.npy"));
        sub.add_option("--algo", o->algo, "weight algorithm")
            ->check(CLI::IsMember({"arq"}))
            ->capture_default_str();
        ptq_cli::add_layer_options(sub, o->type, o->groups);
        sub.add_option("--bits", o->bits, "weight bits")
            ->check(CLI::IsMember({4, 6, 7, 8}))
            ->capture_default_str();
        auto* cw = sub.add_flag("--channel-wise", o->channel_wise, "one scale per output channel");
        auto* pt = sub.add_flag("--per-tensor", o->per_tensor, "one scale for the tensor");
        cw->excludes(pt);
        sub.add_option("--fake-quant-out", o->fake_quant_out,
                       "also write the fake-quantized weight to this .npy");
        sub.add_option("WEIGHT", o->weight, "weight .npy in the framework's layout")->required();
        return [o]() -> int { return run_weights(*o); };
      }};
}
