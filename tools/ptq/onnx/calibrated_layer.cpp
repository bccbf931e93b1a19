// The arithmetic on a calibrated layer's weight (calibrated_layer.hpp).
#include "calibrated_layer.hpp"

#include <cmath>
#include <utility>

#include "ptq/algorithms/layer/conv_bn_fusion.hpp"
#include "ptq/kernels/quantize.hpp"

namespace ptq_cli::onnx_tool {

weight_channels channels_of(const ptq::manifest_layer& m) {
  weight_channels w;
  const auto& s = m.desc.weight.shape;
  const std::size_t n = m.desc.weight.size();
  w.channel.resize(n);
  if (ptq::is_conv_transpose(m.desc.type)) {
    // C × M/g × k…: AMCT's Cout index of group gi, column j is gi·(M/g) + j.
    const std::size_t g = m.desc.conv.groups, per = n / (s[0] * s[1]);
    w.cout = s[1] * g;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t ci = i / (s[1] * per), j = (i / per) % s[1];
      w.channel[i] = (ci / (s[0] / g)) * s[1] + j;
    }
    return w;
  }
  w.cout = s[0];
  const std::size_t per = n / s[0];
  for (std::size_t i = 0; i < n; ++i)
    w.channel[i] = i / per;
  return w;
}

void quantize_codes(layer_work& w) {
  const auto& qw = *w.table->weight;
  const auto ch = channels_of(*w.manifest);
  ptq::kernels::quantizer qz;
  qz.qmin = static_cast<float>(qw.qmin);
  qz.qmax = static_cast<float>(qw.qmax);
  const auto& sw = qw.scales;
  w.codes.resize(w.calibration->weight.size());
  for (std::size_t i = 0; i < w.codes.size(); ++i) {
    qz.scale = sw[sw.size() == 1 ? 0 : ch.channel[i]];
    w.codes[i] = static_cast<std::int8_t>(ptq::kernels::quant_code(w.calibration->weight[i], qz));
  }
}

ptq::result<bool> fold_after_quantization(layer_work& w) {
  const auto& m = *w.manifest;
  const auto ch = channels_of(m);
  auto f =
      ptq::conv_bn_fusion_factors(w.codes.size(), w.bias, ch.cout, *m.desc.batch_norm, m.desc.name);
  if (!f) {
    return ptq::make_error(ptq::errc::onnx_unsupported,
                           "layer '" + m.desc.name + "': " + f.error().message);
  }
  for (std::size_t i = 0; i < w.codes.size(); ++i) {
    if (f->scale[ch.channel[i]] < 0.0f && w.codes[i] == -128)
      return false;
  }
  for (std::size_t i = 0; i < w.codes.size(); ++i) {
    if (f->scale[ch.channel[i]] < 0.0f)
      w.codes[i] = static_cast<std::int8_t>(-w.codes[i]);
  }
  w.channel_scale.resize(ch.cout);
  for (std::size_t c = 0; c < ch.cout; ++c)
    w.channel_scale[c] = std::fabs(f->scale[c]);
  w.bias = std::move(f->bias);
  w.fold_batch_norm = true;
  return true;
}

void divide_channels(layer_work& w, const std::vector<float>& b) {
  if (has_codes(w)) {  // quantized: the factors go after the codes
    if (w.channel_scale.empty())
      w.channel_scale.assign(b.size(), 1.0f);
    for (std::size_t c = 0; c < b.size(); ++c)
      w.channel_scale[c] /= b[c];
  } else {
    const auto ch = channels_of(*w.manifest);
    for (std::size_t i = 0; i < w.weight.size(); ++i)
      w.weight[i] /= b[ch.channel[i]];
  }
  for (std::size_t c = 0; c < w.bias.size() && c < b.size(); ++c)
    w.bias[c] /= b[c];
}

void dequantize_codes(layer_work& w) {
  const auto ch = channels_of(*w.manifest);
  const auto& sw = w.table->weight->scales;
  w.weight.resize(w.codes.size());
  for (std::size_t i = 0; i < w.codes.size(); ++i) {
    const std::size_t c = ch.channel[i];
    w.weight[i] = static_cast<float>(w.codes[i]) * sw[sw.size() == 1 ? 0 : c];
    if (!w.channel_scale.empty())
      w.weight[i] *= w.channel_scale[c];
  }
}

std::vector<float> to_model_layout(const std::vector<float>& v,
                                   const std::vector<std::size_t>& shape,
                                   const onnx::NodeProto& node, std::vector<std::int64_t>& dims) {
  dims.assign(shape.begin(), shape.end());
  if (!weight_is_k_by_n(node))
    return v;
  const std::size_t n = shape[0], k = shape[1];
  std::vector<float> t(v.size());
  for (std::size_t j = 0; j < n; ++j) {
    for (std::size_t i = 0; i < k; ++i)
      t[i * n + j] = v[j * k + i];
  }
  dims = {static_cast<std::int64_t>(k), static_cast<std::int64_t>(n)};
  return t;
}

}  // namespace ptq_cli::onnx_tool
