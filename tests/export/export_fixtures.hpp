// Small records and manifests for the exporter tests, built in code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <xtensor/xbuilder.hpp>

#include "ptq/session/model_manifest.hpp"
#include "ptq/session/record.hpp"

namespace ptq_test {

/// A record entry with 8-bit types and zero weight offsets.
inline ptq::record_entry entry(const std::string& name, float scale_d, std::int32_t offset_d,
                               std::vector<float> scale_w) {
  ptq::layer_record r;
  r.scale_d = scale_d;
  r.offset_d = offset_d;
  r.offset_w.assign(scale_w.size(), 0);
  r.scale_w = std::move(scale_w);
  r.act_type = "INT8";
  r.wts_type = "INT8";
  return {name, r};
}

/// A manifest layer with a zero weight of `shape`, named "<name>.weight".
inline ptq::manifest_layer layer(const std::string& name, ptq::layer_type type,
                                 const std::vector<std::size_t>& shape) {
  ptq::manifest_layer m;
  m.desc.name = name;
  m.desc.type = type;
  m.set_weight(shape, std::vector<float>(ptq::shape_size(shape), 0.0f));
  m.weight_name = name + ".weight";
  return m;
}

}  // namespace ptq_test
