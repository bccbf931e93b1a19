// JSON in time linear in its size, for every reader and writer of ptq's JSON files. nlohmann's
// ordered_json keeps an object's members in a vector and finds a key by scanning it, so its own
// parser, and a writer that adds members with operator[], take time quadratic in an object's
// keys (a record of 50,000 layers: seconds). parse_json_ordered parses with nlohmann's
// std::map-based json, keeps each object's key order from the parser's events, and builds the
// ordered_json by appending; append_member appends a member the caller knows is new. A key
// repeated in one object is reported, not silently replaced, and a syntax error has its
// line:column (lines end as in every ptq position: at LF or a lone CR).
// Depends on: core and nlohmann_json.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ptq/core/abi.hpp"
#include "ptq/detail/text_util.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace detail {

/// Appends `key: value` to the object `obj` without looking for `key` (O(1)): the caller
/// guarantees the key is not in `obj` yet.
inline void append_member(nlohmann::ordered_json& obj, std::string key,
                          nlohmann::ordered_json value) {
  using container = nlohmann::ordered_json::object_t::Container;
  auto& members = obj.get_ref<nlohmann::ordered_json::object_t&>();
  static_cast<container&>(members).emplace_back(std::move(key), std::move(value));
}

/// What parse_json_ordered found.
struct json_parsed {
  nlohmann::ordered_json value;  ///< the document, members in file order (valid when ok)
  bool ok = false;
  std::size_t line = 0;    ///< 1-based position of a syntax error (0 when there is none)
  std::size_t column = 0;  ///< columns count bytes, from after a leading byte order mark
  std::string what;        ///< nlohmann's words for the syntax error
  std::string duplicate;   ///< the first key repeated in one object ("" when none)
};

namespace json_parse_impl {

/// nlohmann's SAX events into an ordered_json, members appended in file order: one pass, no
/// lookup (nlohmann's own DOM parsers are quadratic in an object's members: ordered_map's
/// scans, and the callback parser's walk over the parent object at each member's end).
class ordered_builder : public nlohmann::json_sax<nlohmann::ordered_json> {
 public:
  explicit ordered_builder(json_parsed& out) : out_(out) {}

  bool null() override { return put_value(nullptr); }
  bool boolean(bool v) override { return put_value(v); }
  bool number_integer(number_integer_t v) override { return put_value(v); }
  bool number_unsigned(number_unsigned_t v) override { return put_value(v); }
  bool number_float(number_float_t v, const string_t&) override { return put_value(v); }
  bool string(string_t& v) override { return put_value(std::move(v)); }
  bool binary(binary_t& v) override { return put_value(nlohmann::ordered_json::binary(v)); }
  bool start_object(std::size_t) override { return open(nlohmann::ordered_json::object()); }
  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(nlohmann::ordered_json::array()); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t pos, const std::string&,
                   const nlohmann::detail::exception& e) override {
    byte = pos;
    out_.what = without_position(e.what());
    return false;
  }

  std::size_t byte = 0;

 private:
  /// nlohmann's words without its " at line L, column C": it counts lines at LF only, and the
  /// reader puts ptq's own line:col in front of the message.
  [[nodiscard]] static std::string without_position(std::string what) {
    const auto at = what.find(" at line ");
    const auto colon = at == std::string::npos ? at : what.find(':', at);
    if (colon != std::string::npos)
      what.erase(at, colon - at);
    return what;
  }

  struct level {
    nlohmann::ordered_json* node;
    std::unordered_set<std::string> keys;
  };

  /// Puts `v` where the document is (the root, an array's end, an object's new member) and
  /// returns where it went, or nullptr for the value of a repeated key (reported; the first
  /// value stays). Only the innermost container grows, so the outer levels' pointers stay valid.
  nlohmann::ordered_json* put(nlohmann::ordered_json v) {
    if (stack_.empty()) {
      out_.value = std::move(v);
      return &out_.value;
    }
    auto& top = stack_.back();
    if (top.node->is_array()) {
      top.node->push_back(std::move(v));
      return &top.node->back();
    }
    if (!top.keys.insert(key_).second) {
      if (out_.duplicate.empty())
        out_.duplicate = key_;
      return nullptr;
    }
    append_member(*top.node, key_, std::move(v));
    return &top.node->get_ref<nlohmann::ordered_json::object_t&>().back().second;
  }
  /// A repeated key's object or array is skipped whole: its events only count its depth, so
  /// nothing inside it can reach the document (or a container that is gone).
  bool open(nlohmann::ordered_json container) {
    if (skipped_depth_ > 0) {
      ++skipped_depth_;
      return true;
    }
    if (auto* node = put(std::move(container))) {
      stack_.push_back({node, {}});
    } else {
      skipped_depth_ = 1;
    }
    return true;
  }
  bool close() {
    if (skipped_depth_ > 0) {
      --skipped_depth_;
    } else {
      stack_.pop_back();
    }
    return true;
  }
  bool put_value(nlohmann::ordered_json v) {
    if (skipped_depth_ == 0)
      static_cast<void>(put(std::move(v)));
    return true;
  }

  json_parsed& out_;
  std::vector<level> stack_;
  std::string key_;
  std::size_t skipped_depth_ = 0;  ///< > 0 inside a repeated key's object or array
};

}  // namespace json_parse_impl

/// Parses `text` (JSON) into an ordered_json, in time linear in its size.
[[nodiscard]] inline json_parsed parse_json_ordered(std::string_view text) {
  json_parsed out;
  json_parse_impl::ordered_builder builder(out);
  if (nlohmann::ordered_json::sax_parse(text.begin(), text.end(), &builder)) {
    out.ok = true;
    return out;
  }
  out.value = nullptr;
  out.line = 1;
  out.column = 1;
  // nlohmann skips a leading byte order mark but counts it; columns count from after it.
  const std::size_t first = text.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;
  for (std::size_t i = first; i + 1 < builder.byte && i < text.size(); ++i) {
    if (ends_line(text, i)) {
      ++out.line;
      out.column = 1;
    } else {
      ++out.column;
    }
  }
  return out;
}

}  // namespace detail
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
