// `ptq balance --alpha A --type T [--groups G] ACT.npy W.npy`: DMQ balance factors of one layer.
// Prints {"tensor_balance_factor": [...]}.
#include <iostream>
#include <memory>
#include <string>

#include "command.hpp"
#include "numeric_io.hpp"

namespace {

struct balance_options {
  double alpha = 0.5;
  std::string type;
  std::size_t groups = 1;
  std::string act;
  std::string weight;
};

int run_balance(const balance_options& o) {
  const std::string cmd = "balance";
  auto op = ptq_cli::parse_layer_type(o.type, cmd);
  if (!op)
    return ptq_cli::exit_error;
  auto a = ptq_cli::load_tensor(o.act, cmd, ptq::io::npy_values::as_stored);
  if (!a)
    return ptq_cli::exit_error;
  auto w = ptq_cli::load_tensor(o.weight, cmd, ptq::io::npy_values::as_stored);
  if (!w)
    return ptq_cli::exit_error;
  ptq::tensor_view act = a->view();  // float16 is read where it lies
  act.name = o.act;
  ptq::tensor_view wt = w->view();
  wt.name = o.weight;
  auto f = ptq::dmq_factors(act, wt, *op, o.groups, ptq::dmq_settings{o.alpha},
                            ptq_cli::numeric_kernels());
  if (!f)
    return ptq_cli::numeric_fail(cmd, f.error());
  std::cout << "{\"tensor_balance_factor\": " << ptq_cli::json_list(f.value(), ptq_cli::json_float)
            << "}\n";
  return ptq_cli::exit_ok;
}

}  // namespace

ptq_cli::command_def ptq_cli::balance_command() {
  return {
      "balance", "DMQ balance factors of one layer from its input batch and weight",
      [](CLI::App& sub) -> ptq_cli::run_fn {
        auto o = std::make_shared<balance_options>();
        sub.footer(
            ptq_cli::numeric_example("ptq balance --type Conv2d examples/numerics/conv2_input0.npy "
                                     "examples/numerics/conv2_weight.npy"));
        sub.add_option("--alpha", o->alpha, "migration_strength in [0.2, 0.8]")
            ->check(CLI::Range(0.2, 0.8))
            ->capture_default_str();
        ptq_cli::add_layer_options(sub, o->type, o->groups);
        sub.add_option("ACT", o->act, "the layer's input batch (.npy)")->required();
        sub.add_option("WEIGHT", o->weight, "the layer's weight (.npy, native layout)")->required();
        return [o]() -> int { return run_balance(*o); };
      }};
}
