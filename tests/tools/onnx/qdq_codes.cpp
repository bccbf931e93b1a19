// Test helper of the onnx_* tests: ptq's own quantizer applied to a .npy, so that the Python
// tests can compare ONNX QuantizeLinear/DequantizeLinear results (libonnx-testdata's vectors,
// the exported model's Q/DQ nodes) with ptq's arithmetic bit for bit.
//   qdq_codes quantize   IN.npy OUT.npy SCALE OFFSET QMIN QMAX   codes (kernels::quantize_ref)
//   qdq_codes fake       IN.npy OUT.npy SCALE OFFSET QMIN QMAX   the session's fake-quant kernel
//   qdq_codes dequantize IN.npy OUT.npy SCALE OFFSET             (code - offset) * scale, the
//                                                                dequantizing half of fake_quant
// Every value is float32; codes are written as float32 integers.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ptq/io/npy.hpp"
#include "ptq/kernels/kernel_set.hpp"
#include "ptq/kernels/quantize.hpp"

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const bool dq = mode == "dequantize";
  if ((mode != "quantize" && mode != "fake" && !dq) || argc != (dq ? 6 : 8)) {
    std::fprintf(stderr,
                 "usage: qdq_codes quantize|fake IN OUT SCALE OFFSET QMIN QMAX\n"
                 "       qdq_codes dequantize IN OUT SCALE OFFSET\n");
    return 2;
  }
  auto in = ptq::io::try_read_npy(argv[2]);
  if (!in) {
    std::fputs(ptq::format_error(in.error()).c_str(), stderr);
    return 1;
  }
  ptq::kernels::quantizer qz;
  qz.scale = std::strtof(argv[4], nullptr);
  qz.offset = std::strtof(argv[5], nullptr);
  if (!dq) {
    qz.qmin = std::strtof(argv[6], nullptr);
    qz.qmax = std::strtof(argv[7], nullptr);
  }
  const auto& x = in->data;
  std::vector<float> out(x.size());
  if (mode == "quantize") {
    ptq::kernels::quantize_ref(x.data(), x.size(), qz, out.data());
  } else if (mode == "fake") {
    ptq::kernels::default_kernels().fake_quant(x.data(), x.size(), qz, out.data());
  } else {
    for (std::size_t i = 0; i < x.size(); ++i)
      out[i] = (x[i] - qz.offset) * qz.scale;
  }
  auto st = ptq::io::write_npy(argv[3], out.data(), in->shape);
  if (!st) {
    std::fputs(ptq::format_error(st.error()).c_str(), stderr);
    return 1;
  }
  return 0;
}
