// The model manifest reader (ptq/session/model_manifest.hpp) over an in-memory weights source: what
// it reads, and each malformed entry an exact E804 error naming the layer and the key.
#include <catch2/catch.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "ptq/io/safetensors.hpp"
#include "ptq/session/model_manifest.hpp"

namespace {

ptq::io::safetensors_file weights() {
  const std::vector<float> w(2 * 3, 0.5f);
  auto r = ptq::io::try_parse_safetensors(ptq::io::format_safetensors(
      {{"fc.weight", {2, 3}, w}, {"fc.bias", {2}, {1, 2}}, {"bn.w", {2}, {1, 1}}}));
  REQUIRE(r.ok());
  return std::move(r).value();
}

std::string manifest_error(std::string_view text) {
  const auto r = ptq::try_parse_manifest(text, weights());
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ptq::errc::manifest_invalid);
  return r.error().message;
}

}  // namespace

TEST_CASE("manifest: layers, tensors and attributes", "[io][manifest]") {
  const auto r = ptq::try_parse_manifest(
      R"({"input_shape": [3], "layers": [
           {"name": "fc", "type": "Linear", "weight": "fc.weight", "bias": "fc.bias",
            "flatten": true, "activation": {"type": "LeakyReLU", "negative_slope": 0.25}},
           {"name": "pool", "type": "AvgPool2d", "kernel_size": 2}]})",
      weights());
  REQUIRE(r.ok());
  REQUIRE(r->layers.size() == 2);
  const auto& fc = r->layers[0];
  CHECK(fc.desc.name == "fc");
  CHECK(fc.weight_name == "fc.weight");
  CHECK(fc.desc.weight.shape == std::vector<std::size_t>{2, 3});
  REQUIRE(fc.desc.bias.has_value());
  const float bias1 = fc.desc.bias->at(1);
  CHECK(bias1 == 2.0f);
  CHECK(fc.flatten);
  CHECK(fc.desc.activation.negative_slope == 0.25f);
  CHECK(r->layers[1].kernel_size == std::vector<std::size_t>{2, 2});
  CHECK(r->layers[1].pool_stride == std::vector<std::size_t>{2, 2});
  CHECK(r->input_shape == std::vector<std::size_t>{3});
}

TEST_CASE("manifest: malformed entries are exact errors", "[io][manifest]") {
  CHECK(manifest_error("[]") == "the manifest must be a JSON object with a \"layers\" list");
  CHECK(manifest_error(R"({"layers": [{"type": "Linear"}]})") ==
        "layer 1: needs a string \"name\"");
  CHECK(manifest_error(R"({"layers": [{"name": "fc", "type": "LSTM"}]})") ==
        "layer 'fc': type \"LSTM\" is not one ptq calibrates (Conv1d, Conv2d, Conv3d, "
        "ConvTranspose1d, ConvTranspose2d, Linear, AvgPool2d)");
  CHECK(manifest_error(R"({"layers": [{"name": "fc", "type": "Linear", "weight": "nope"}]})") ==
        "layer 'fc': \"weight\": tensor 'nope' is not in the file");
  // Keys that once reached nlohmann's unchecked operator[] or its throwing value().
  CHECK(manifest_error(R"({"layers": [{"name": "c", "type": "Conv2d", "weight": "fc.weight",
                                        "batch_norm": {"weight": "bn.w"}}]})") ==
        "layer 'c': batch_norm: \"bias\" must name a tensor of the weights file");
  CHECK(manifest_error(R"({"layers": [{"name": "fc", "type": "Linear", "weight": "fc.weight",
                                        "flatten": 1}]})") ==
        "layer 'fc': \"flatten\" must be true or false");
  CHECK(manifest_error(R"({"layers": [{"name": "fc", "type": "Linear", "weight": "fc.weight",
                                        "activation": {"type": "LeakyReLU",
                                                       "negative_slope": "x"}}]})") ==
        "layer 'fc': LeakyReLU \"negative_slope\" must be a number");
  CHECK(manifest_error(R"({"layers": [{"name": "fc", "type": "Linear", "weight": "fc.weight",
                                        "activation": {"type": "PReLU"}}]})") ==
        "layer 'fc': PReLU: \"weight\" must name a tensor of the weights file");
  CHECK(manifest_error(R"({"layers": [{"name": "fc", "type": "Linear", "weight": "fc.weight",
                                        "activation": {"type": "GELU", "approximate": 1}}]})") ==
        "layer 'fc': GELU \"approximate\" must be \"none\" or \"tanh\"");
  CHECK(manifest_error(R"({"layers": [{"name": "fc", "type": "Linear", "weight": "fc.weight",
                                        "activation": {"type": "RReLU", "lower": null}}]})") ==
        "layer 'fc': RReLU \"lower\" and \"upper\" must be numbers");
}

TEST_CASE("manifest: unknown keys and conv attributes out of range are errors", "[io][manifest]") {
  const auto note_of = [](std::string_view text) {
    const auto r = ptq::try_parse_manifest(text, weights());
    REQUIRE_FALSE(r.ok());
    return r.error().note;
  };
  // A typo calibrated the conv unfused with no word: now it is E804 with the nearest key.
  const char* typo = R"({"layers": [{"name": "c", "type": "Conv2d", "weight": "fc.weight",
                                     "batchnorm": {"weight": "bn.w"}}]})";
  CHECK(manifest_error(typo) == "layer 'c': unknown key \"batchnorm\"");
  CHECK(note_of(typo) == "did you mean 'batch_norm'?");
  CHECK(manifest_error(R"({"layer": []})") == "the manifest: unknown key \"layer\"");
  CHECK(manifest_error(R"({"layers": [{"name": "fc", "type": "Linear", "weight": "fc.weight",
                                        "stride": [1]}]})") ==
        "layer 'fc': unknown key \"stride\"");
  CHECK(manifest_error(R"({"layers": [{"name": "p", "type": "AvgPool2d", "kernel_size": 2,
                                        "weight": "fc.weight"}]})") ==
        "layer 'p': unknown key \"weight\"");
  CHECK(manifest_error(R"({"layers": [{"name": "c", "type": "Conv2d", "weight": "fc.weight",
                                        "batch_norm": {"weight": "bn.w", "epsilon": 1}}]})") ==
        "layer 'c': batch_norm: unknown key \"epsilon\"");
  CHECK(manifest_error(R"({"layers": [{"name": "fc", "type": "Linear", "weight": "fc.weight",
                                        "activation": {"type": "ReLU", "inplace": true}}]})") ==
        "layer 'fc': activation: unknown key \"inplace\"");
  // metadata holds anything.
  CHECK(ptq::try_parse_manifest(R"({"metadata": {"seed": 1}, "layers": []})", weights()).ok());

  const auto conv = [](const std::string& attr) {
    return R"({"layers": [{"name": "c", "type": "Conv2d", "weight": "fc.weight", )" + attr + "}]}";
  };
  CHECK(manifest_error(conv(R"("stride": [0, 1])")) ==
        "layer 'c': \"stride\" value 0 is outside [1, 1048576]");
  CHECK(manifest_error(conv(R"("dilation": [1, 4000000000])")) ==
        "layer 'c': \"dilation\" value 4000000000 is outside [1, 1048576]");
  CHECK(manifest_error(conv(R"("padding": [1, 1, 1])")) ==
        "layer 'c': \"padding\" has 3 values; the layer has 2 spatial dimension(s) (give 1 or 2)");
  CHECK(manifest_error(R"({"layers": [{"name": "p", "type": "AvgPool2d", "kernel_size": 0}]})") ==
        "layer 'p': \"kernel_size\" value 0 is outside [1, 1048576]");
  CHECK(manifest_error("{\"layers\": [\n  {\"name\": \"c\",,}]}")
            .rfind("the manifest is not valid JSON at 2:16: ", 0) == 0);
}
