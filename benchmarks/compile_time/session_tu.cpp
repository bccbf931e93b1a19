// A TU that uses the session as an engine does: create it from a config and its layers, feed
// each layer's batches, write the record.
#include <ptq/config.hpp>
#include <ptq/session/calibration_session.hpp>
#include <ptq/session/record.hpp>

#include <cstdio>
#include <utility>
#include <vector>

int main() {
  const auto cfg = ptq::try_parse_config("batch_num: 1\n");
  if (!cfg)
    return 1;
  std::vector<float> w(2 * 4);
  for (std::size_t i = 0; i < w.size(); ++i)
    w[i] = 0.25f * static_cast<float>(i) - 1.0f;
  ptq::layer_desc fc;
  fc.name = "fc";
  fc.type = ptq::layer_type::linear;
  fc.weight = ptq::view_of(w.data(), {2, 4});
  auto created = ptq::calibration_session::create(cfg.value(), {fc});
  if (!created)
    return 1;
  auto s = std::move(created).value();
  if (!s.quantize_weights())
    return 1;
  const std::vector<float> x{0.5f, -1.0f, 2.0f, 0.0f};
  if (!s.feed("fc", ptq::view_of(x.data(), {1, 4}, "fc input")))
    return 1;
  std::printf("%s", ptq::write_record(s.record().value()).c_str());
  return 0;
}
