// ADA (AdaRound) weight quantization (docs/ada.md): the KL initial scale, then per weight a learned
// choice between rounding down and up, so that act(layer(x)) with the quantized weight stays
// close to the float layer's output on the caller's samples. Adam on α only; the rounding
// regulariser with the annealed β starts after the warm start; the rounding is made hard at the
// end (h ≥ 0.5 rounds up: ptq's decision where the toolkit writes the soft weight; docs/ada.md).
//
// Deterministic: minibatches come from a seeded std::mt19937_64, every reduction has a fixed
// order, and threads only split independent work, so a seed gives bit-identical weights on every
// run and thread count.
// Depends on: core and kernels.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ptq/algorithms/layer/activation_fn.hpp"
#include "ptq/algorithms/layer/layer_compute.hpp"
#include "ptq/algorithms/weights/ada_kl.hpp"
#include "ptq/algorithms/weights/ada_problem.hpp"
#include "ptq/algorithms/weights/ada_rounding.hpp"
#include "ptq/algorithms/weights/arq.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/kernels/kernel_set.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

namespace detail {

// The per-element state of the optimisation. `base` = floor(W/s), `scale` = s of the element's
// output channel.
struct ada_state {
  std::vector<float> base;
  std::vector<float> scale;
  std::vector<float> alpha;
  std::vector<float> m;
  std::vector<float> v;
  std::vector<float> sig;  // sigmoid(α) of the current iteration (reused by the backward step)
};

// Blocks of the element-wise passes: fixed-size, so the regulariser's sum (per block, then in
// block order) does not depend on the thread count.
inline constexpr std::size_t ada_block = 16384;

inline kernels::ada_arrays arrays_at(ada_state& st, std::size_t offset) noexcept {
  return {st.base.data() + offset, st.scale.data() + offset, st.alpha.data() + offset,
          st.m.data() + offset,    st.v.data() + offset,     st.sig.data() + offset};
}

// W_soft = clamp(base + h(α), −128, 127)·s; stores sigmoid(α) for the step.
inline void ada_soft_weight(ada_state& st, float* w, const kernels::kernel_set& k,
                            unsigned threads) {
  const std::size_t n = st.alpha.size();
  kernels::parallel_blocks((n + ada_block - 1) / ada_block, threads, [&](std::size_t b) {
    const std::size_t begin = b * ada_block;
    k.ada_soft_weight(arrays_at(st, begin), std::min(n, begin + ada_block) - begin, w + begin);
  });
}

// ∂loss/∂α for every weight and one Adam step; returns the rounding regulariser's value.
inline double ada_update(ada_state& st, const float* grad_w, const kernels::ada_step_params& p,
                         const kernels::kernel_set& k, unsigned threads) {
  const std::size_t n = st.alpha.size();
  const std::size_t nblocks = (n + ada_block - 1) / ada_block;
  std::vector<double> partial(nblocks, 0.0);
  kernels::parallel_blocks(nblocks, threads, [&](std::size_t b) {
    const std::size_t begin = b * ada_block;
    partial[b] =
        k.ada_step(arrays_at(st, begin), std::min(n, begin + ada_block) - begin, grad_w + begin, p);
  });
  double total = 0.0;
  for (double v : partial)
    total += v;
  return static_cast<double>(p.reg_param) * total;
}

}  // namespace detail

/// The reconstruction loss of the toolkit, Σ‖act(layer(x)) − target‖² over channels, averaged
/// over samples and positions, of weight `w` on all `p.samples` samples (in chunks of
/// `chunk` samples; summed in double).
[[nodiscard]] inline result<double> ada_reconstruction_loss(
    const ada_problem& p, const float* w, const float* target,
    const kernels::kernel_set& k = kernels::default_kernels(), unsigned threads = 1,
    std::size_t chunk = 64) {
  layer_compute lc(p.geometry, threads, k);
  const std::size_t in = input_size(p.geometry);
  const std::size_t out = output_size(p.geometry);
  const std::size_t spatial = out / p.geometry.out_channels;
  std::vector<float> y(chunk * out);
  double sum = 0.0;
  for (std::size_t s0 = 0; s0 < p.samples; s0 += chunk) {
    const std::size_t nb = std::min(chunk, p.samples - s0);
    if (auto st = lc.forward(p.input + s0 * in, nb, w, p.bias, y.data()); !st)
      return st.error();
    if (auto st = activation_forward(p.activation, y.data(), y.data(), nb, p.geometry.out_channels,
                                     spatial);
        !st) {
      return st.error();
    }
    const float* t = target + s0 * out;
    for (std::size_t i = 0; i < nb * out; ++i) {
      const double d = static_cast<double>(y[i]) - static_cast<double>(t[i]);
      sum += d * d;
    }
  }
  return sum / static_cast<double>(p.samples * spatial);
}

/// act(layer(input)) with the float weight: the AdaRound target of `p` on its own samples.
[[nodiscard]] inline result<std::vector<float>> ada_float_target(
    const ada_problem& p, const kernels::kernel_set& k = kernels::default_kernels(),
    unsigned threads = 1) {
  layer_compute lc(p.geometry, threads, k);
  const std::size_t out = output_size(p.geometry);
  const std::size_t spatial = out / p.geometry.out_channels;
  std::vector<float> y(p.samples * out);
  if (auto st = lc.forward(p.input, p.samples, p.weight, p.bias, y.data()); !st)
    return st.error();
  if (auto st = activation_forward(p.activation, y.data(), y.data(), p.samples,
                                   p.geometry.out_channels, spatial);
      !st) {
    return st.error();
  }
  return y;
}

namespace detail {

/// ada_round's settings alone, checked before any work (the layer's name prefixes a message).
[[nodiscard]] inline result<> check_ada_settings(const ada_settings& s) {
  const auto fail = [](const char* what) { return make_error(errc::invalid_argument, what); };
  if (!(s.reg_param >= 0.0f) || !std::isfinite(s.reg_param))
    return fail("reg_param must be finite and >= 0");
  if (!(s.warm_start >= 0.0f && s.warm_start <= 1.0f))
    return fail("warm_start must be in [0, 1]");
  if (!std::isfinite(s.beta_range_start) || !std::isfinite(s.beta_range_end) ||
      s.beta_range_start <= 0.0f || s.beta_range_end <= 0.0f) {
    return fail("beta_range_start and beta_range_end must be finite and > 0");
  }
  if (s.batch_size == 0)
    return fail("batch_size must be > 0");
  return {};
}

/// ada_round's inputs and settings, checked before any work.
[[nodiscard]] inline result<> check_ada_problem(const ada_problem& p, const ada_settings& s) {
  const auto fail = [&](std::string what) {
    return make_error(errc::invalid_argument, p.name + ": " + std::move(what));
  };
  if (auto st = validate_geometry(p.geometry); !st)
    return make_error(st.error().code, p.name + ": " + st.error().message);
  if (auto st = check_activation(p.activation, p.geometry.out_channels); !st)
    return make_error(st.error().code, p.name + ": " + st.error().message);
  if (auto st = check_ada_settings(s); !st)
    return fail(st.error().message);
  if (!p.weight)
    return fail("no weight");
  if (s.num_iteration > 0 && (p.samples == 0 || !p.input))
    return fail("AdaRound needs input samples (none given)");
  return {};
}

/// The soft rounding before the first step: each weight's channel scale (of the KL `scales`),
/// its floor on the grid, and α from the fractional part.
[[nodiscard]] inline result<ada_state> initial_ada_state(const ada_problem& p,
                                                         const tensor_view& wref,
                                                         std::size_t groups,
                                                         const weight_quant_result& scales) {
  const std::size_t nw = wref.size();
  ada_state st;
  st.scale.resize(nw);
  if (auto e = for_each_channel_run(
          wref.shape, p.geometry.type, groups, scales, wref.name,
          [&](std::size_t off, std::size_t len, const kernels::quantizer& qz) {
            std::fill_n(st.scale.begin() + static_cast<std::ptrdiff_t>(off), len, qz.scale);
          });
      !e) {
    return e.error();
  }
  st.base.resize(nw);
  st.alpha.resize(nw);
  st.m.assign(nw, 0.0f);
  st.v.assign(nw, 0.0f);
  st.sig.resize(nw);
  for (std::size_t i = 0; i < nw; ++i) {
    const float r = p.weight[i] / st.scale[i];
    const float f = std::floor(r);
    st.base[i] = f;
    st.alpha[i] = ada_alpha_init(r - f);
  }
  return st;
}

/// `num_iteration` Adam steps on α (docs/ada.md) over minibatches of the samples, towards the
/// target act(float layer): `p.target`, or computed here when it is null.
[[nodiscard]] inline result<> optimise_ada(const ada_problem& p, const ada_settings& s,
                                           const kernels::kernel_set& k, ada_state& st) {
  const layer_geometry& geo = p.geometry;
  const std::size_t nw = st.alpha.size();
  const std::size_t in = input_size(geo);
  const std::size_t out = output_size(geo);
  const std::size_t spatial = out / geo.out_channels;
  if (auto c = checked_minmax(p.name + " input", p.input, p.samples * in, k.minmax); !c)
    return c.error();
  std::vector<float> own_target;
  const float* target = p.target;
  if (!target) {
    auto t = ada_float_target(p, k, s.threads);
    if (!t)
      return t.error();
    own_target = std::move(t).value();
    target = own_target.data();
  }
  if (auto c = checked_minmax(p.name + " target", target, p.samples * out, k.minmax); !c)
    return c.error();

  const std::size_t batch = std::min(s.batch_size, p.samples);
  const std::size_t madds = batch * nw * (out / geo.out_channels);
  const unsigned threads = madds >= s.parallel_madds ? s.threads : 1U;
  layer_compute lc(geo, threads, k);
  // The geometry and activation were checked above: the calls below cannot fail.
  (void)lc.bind_inputs(p.input, p.samples);
  std::vector<float> d(batch * out);
  std::vector<float> z(batch * out);
  std::vector<float> y(batch * out);
  std::vector<double> sample_loss(batch);
  std::vector<float> w(nw);
  std::vector<float> gw(nw);
  std::vector<std::size_t> perm(p.samples);
  for (std::size_t i = 0; i < perm.size(); ++i)
    perm[i] = i;
  std::mt19937_64 rng(s.seed);

  const std::size_t total = s.num_iteration;
  // The regulariser is off while t < warm_start·num_iteration.
  const double warm = static_cast<double>(s.warm_start) * static_cast<double>(total);
  const auto norm = static_cast<double>(batch * spatial);
  for (std::size_t t = 0; t < total; ++t) {
    // Minibatch: the first `batch` entries of a partial Fisher–Yates shuffle (distinct samples).
    for (std::size_t i = 0; i < batch; ++i) {
      const std::size_t j = i + static_cast<std::size_t>(rng() % (p.samples - i));
      std::swap(perm[i], perm[j]);
    }
    detail::ada_soft_weight(st, w.data(), k, threads);
    (void)lc.forward_bound(perm.data(), batch, w.data(), p.bias, z.data());
    // Per sample, on the threads: y = act(z), d = y - target, ∂recon/∂y = scale·d, then
    // ∂recon/∂z into y; and the sample's share of the loss. Element-wise, so the same bits.
    const auto scale = static_cast<float>(2.0 / norm);
    kernels::parallel_blocks(batch, threads, [&](std::size_t i) {
      float* yi = y.data() + i * out;
      float* di = d.data() + i * out;
      const float* zi = z.data() + i * out;
      const float* ti = target + perm[i] * out;
      (void)activation_forward(p.activation, zi, yi, 1, geo.out_channels, spatial);
      for (std::size_t e = 0; e < out; ++e) {
        di[e] = yi[e] - ti[e];
        yi[e] = scale * di[e];
      }
      (void)activation_backward(p.activation, zi, yi, yi, 1, geo.out_channels, spatial);
      sample_loss[i] = detail::sum_of_squares(di, out);
    });
    double recon = 0.0;  // the samples' sums in sample order: the same for every thread count
    for (const double l : sample_loss)
      recon += l;
    recon /= norm;
    (void)lc.weight_grad_bound(perm.data(), batch, y.data(), gw.data());  // y: ∂recon/∂z
    const float beta = static_cast<double>(t) >= warm
                           ? ada_beta(t, warm, total, s.beta_range_start, s.beta_range_end)
                           : 0.0f;
    const adam_step_constants ac = adam_constants(s.adam, t + 1);
    const kernels::ada_step_params sp{s.reg_param,    beta,         s.adam.beta1, s.adam.beta2,
                                      s.adam.epsilon, ac.step_size, ac.sqrt_bias2};
    const double round = detail::ada_update(st, gw.data(), sp, k, threads);
    if (!std::isfinite(recon + round)) {
      return make_error(
          errc::non_finite,
          p.name + ": the AdaRound loss is not finite at iteration " + std::to_string(t + 1));
    }
    if (s.on_progress &&
        ((t + 1) % std::max<std::size_t>(s.report_every, 1) == 0 || t + 1 == total)) {
      s.on_progress(ada_progress{t + 1, total, recon, round});
    }
  }
  return {};
}

/// The hard rounding of the learned α (ptq's decision, docs/ada.md: h ≥ 0.5 rounds up), with
/// the KL `params` and the counts of rounded-up and changed weights.
[[nodiscard]] inline ada_result hard_round(const ada_problem& p, const ada_state& st,
                                           weight_quant_result params) {
  const std::size_t nw = st.alpha.size();
  ada_result r;
  r.params = std::move(params);
  r.weight.resize(nw);
  for (std::size_t i = 0; i < nw; ++i) {
    const bool up = ada_rectified_sigmoid(st.alpha[i]) >= 0.5f;
    r.rounded_up += up ? 1 : 0;
    const float nearest = round_half_even(p.weight[i] / st.scale[i]);
    const float q = std::clamp(st.base[i] + (up ? 1.0f : 0.0f), -128.0f, 127.0f);
    r.changed += q != std::clamp(nearest, -128.0f, 127.0f) ? 1 : 0;
    r.weight[i] = q * st.scale[i];
  }
  return r;
}

}  // namespace detail

/// AdaRound of one layer (docs/ada.md): KL scales, then `num_iteration` Adam steps on α over
/// minibatches, then hard rounding. Errors: bad geometry or activation, missing or non-finite
/// data, bad settings, a non-finite loss.
[[nodiscard]] inline result<ada_result> ada_round(
    const ada_problem& p, const ada_settings& s,
    const kernels::kernel_set& k = kernels::default_kernels()) {
  if (auto st = detail::check_ada_problem(p, s); !st)
    return st.error();
  const layer_geometry& geo = p.geometry;
  const tensor_view wref = view_of(p.weight, weight_shape(geo), p.name + ".weight");
  const std::size_t groups = geo.type == layer_type::linear ? 1 : geo.groups;
  auto scales = ada_kl_calibrate(wref, geo.type, groups, s.channel_wise, k);
  if (!scales)
    return scales.error();
  auto st = detail::initial_ada_state(p, wref, groups, scales.value());
  if (!st)
    return st.error();
  if (s.num_iteration > 0) {
    if (auto o = detail::optimise_ada(p, s, k, st.value()); !o)
      return o.error();
  }
  return detail::hard_round(p, st.value(), std::move(scales).value());
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
