// `ptq export --format onnx-qdq --onnx IN --record R --model M [--config CFG] -o OUT`.
// Interim command of the onnx branch: the exporters branch (exp) brings the full `ptq export`
// with every format; onnx-qdq is then one more format of it (run_onnx_qdq, onnx_qdq.hpp).
#include <iostream>
#include <memory>
#include <string>

#include "command.hpp"
#include "onnx_qdq.hpp"

namespace {

struct export_options {
  std::string format;
  ptq_cli::onnx_qdq_request onnx;
  bool quiet = false;
};

const ptq_cli::register_command reg{
    {"export", "Export a calibration record to an engine's format (onnx-qdq)", 45,
     [](CLI::App& sub) -> ptq_cli::run_fn {
       auto o = std::make_shared<export_options>();
       sub.add_option("--format", o->format, "output format")
           ->required()
           ->check(CLI::IsMember({"onnx-qdq"}));
       sub.add_option("--record", o->onnx.record_path, "the calibration record")->required();
       sub.add_option("--model", o->onnx.manifest_path, "the model manifest (JSON)");
       sub.add_option("--onnx", o->onnx.onnx_path, "the float ONNX model")->required();
       sub.add_option("--config", o->onnx.config_path,
                      "the calibration's quant config (for layers with a BatchNorm)");
       sub.add_flag("--uint8-activations", o->onnx.uint8_activations,
                    "activation zero points as uint8 (offset_d + 128) instead of int8");
       sub.add_option("-o,--output", o->onnx.output_path, "the file to write")->required();
       sub.add_flag("--quiet", o->quiet, "print nothing on success");
       return [o]() -> int { return ptq_cli::run_onnx_qdq(o->onnx, o->quiet); };
     }}};

}  // namespace
