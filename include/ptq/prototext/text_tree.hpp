// Schema-free parse of protobuf text format into a tree of fields and values. The typed binder
// (prototext/text_binder.hpp), which the config parser and the record reader share, gives the
// tree its meaning.
// Depends on: core.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ptq/core/abi.hpp"
#include "ptq/core/visible_text.hpp"
#include "ptq/prototext/diagnostics.hpp"
#include "ptq/prototext/lexer.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace text {

struct text_field;

/// A field's value: a scalar token (adjacent string literals already joined) or a message.
struct text_value {
  bool is_message = false;
  token scalar;                    ///< when !is_message
  std::vector<text_field> fields;  ///< when is_message
  source_region where;             ///< the scalar, or the opening brace of the message
};

/// `name: value`, `name { ... }` or `name: [v1, v2]`.
struct text_field {
  std::string name;
  source_region name_region;
  bool has_colon = false;
  bool is_list = false;            ///< written as `[ ... ]`
  std::vector<text_value> values;  ///< one value unless is_list
};

using text_message = std::vector<text_field>;

class text_parser {
 public:
  text_parser(std::string_view text, text_limits limits) : lex_(text, limits), limits_(limits) {}

  bool run(text_message& out) {
    if (!advance())
      return false;
    if (!parse_fields(out, 0, nullptr))
      return false;
    return true;
  }
  [[nodiscard]] ptq::error take_error() { return std::move(error_); }

 private:
  bool advance() {
    if (!lex_.next(tok_)) {
      error_ = lex_.error();
      return false;
    }
    return true;
  }
  [[nodiscard]] bool at_punct(char c) const noexcept {
    return tok_.kind == token_kind::punct && tok_.raw.size() == 1 && tok_.raw[0] == c;
  }
  bool fail(errc code, std::string message, source_region where) {
    error_ = {code, severity::error, std::move(message), where, {}};
    return false;
  }
  [[nodiscard]] std::string describe() const {
    switch (tok_.kind) {
      case token_kind::end:
        return "end of input";
      case token_kind::string:
        return "string " + detail::quoted_value(tok_.raw);
      default:
        return "'" + detail::quoted_value(tok_.raw) + "'";
    }
  }
  bool unexpected(std::string_view expected) {
    if (tok_.kind == token_kind::end) {
      return fail(errc::unexpected_end,
                  "unexpected end of input; expected " + std::string(expected), tok_.where);
    }
    return fail(errc::unexpected_token,
                "unexpected " + describe() + "; expected " + std::string(expected), tok_.where);
  }

  // Fields until `close` (or end of input at top level).
  bool parse_fields(text_message& out, std::uint32_t depth, const char* close) {
    while (true) {
      if (close == nullptr && tok_.kind == token_kind::end)
        return true;
      if (close != nullptr && at_punct(*close))
        return true;
      if (tok_.kind != token_kind::identifier) {
        if (close != nullptr && tok_.kind == token_kind::end) {
          return fail(errc::unexpected_end,
                      std::string("unexpected end of input; expected '") + *close +
                          "' to close the message",
                      tok_.where);
        }
        return unexpected("a field name");
      }
      text_field field;
      field.name = tok_.text;
      field.name_region = tok_.where;
      if (!advance())
        return false;
      if (at_punct(':')) {
        field.has_colon = true;
        if (!advance())
          return false;
      }
      if (at_punct('[')) {
        field.is_list = true;
        const source_region open = tok_.where;
        if (!advance())
          return false;
        if (!at_punct(']')) {
          while (true) {
            text_value v;
            if (!parse_value(v, depth, field.has_colon))
              return false;
            field.values.push_back(std::move(v));
            if (at_punct(',')) {
              if (!advance())
                return false;
              continue;
            }
            if (at_punct(']'))
              break;
            if (tok_.kind == token_kind::end) {
              return fail(errc::unexpected_end,
                          "unexpected end of input; the list opened here is not closed", open);
            }
            return unexpected("',' or ']'");
          }
        }
        if (!advance())
          return false;
      } else {
        text_value v;
        if (!parse_value(v, depth, field.has_colon))
          return false;
        field.values.push_back(std::move(v));
      }
      out.push_back(std::move(field));
      if (at_punct(',') || at_punct(';')) {
        if (!advance())
          return false;
      }
    }
  }

  bool parse_value(text_value& v, std::uint32_t depth, bool had_colon) {
    if (at_punct('{') || at_punct('<')) {
      if (depth + 1 > limits_.max_depth) {
        return fail(
            errc::nesting_too_deep,
            "messages are nested deeper than " + std::to_string(limits_.max_depth) + " levels",
            tok_.where);
      }
      const char close = at_punct('{') ? '}' : '>';
      v.is_message = true;
      v.where = tok_.where;
      if (!advance())
        return false;
      if (!parse_fields(v.fields, depth + 1, &close))
        return false;
      return advance();  // consume the closing delimiter
    }
    if (!had_colon) {
      if (tok_.kind == token_kind::identifier || tok_.kind == token_kind::number ||
          tok_.kind == token_kind::string) {
        return fail(errc::missing_colon, "expected ':' between a field name and its value",
                    tok_.where);
      }
      return unexpected("':' or '{'");
    }
    if (tok_.kind == token_kind::string) {
      v.scalar = tok_;
      v.where = tok_.where;
      if (!advance())
        return false;
      while (tok_.kind == token_kind::string) {  // adjacent literals concatenate
        v.scalar.text += tok_.text;
        v.scalar.spans_lines = v.scalar.spans_lines || tok_.spans_lines;
        v.scalar.where.end = tok_.where.end;
        v.where.end = tok_.where.end;
        if (!advance())
          return false;
      }
      return true;
    }
    if (tok_.kind == token_kind::identifier || tok_.kind == token_kind::number) {
      v.scalar = tok_;
      v.where = tok_.where;
      return advance();
    }
    return unexpected("a value");
  }

  lexer lex_;
  text_limits limits_;
  token tok_;
  ptq::error error_;
};

/// Parses protobuf text into a schema-free tree. Never throws a parse error.
[[nodiscard]] inline result<text_message> parse_text_tree(std::string_view text,
                                                          text_limits limits = {}) {
  if (text.size() > limits.max_input_bytes) {
    return result<text_message>(
        std::vector<error>{{errc::input_too_large,
                            severity::error,
                            "input is " + std::to_string(text.size()) + " bytes; the limit is " +
                                std::to_string(limits.max_input_bytes),
                            {},
                            {}}});
  }
  text_parser p(text, limits);
  text_message msg;
  if (!p.run(msg))
    return result<text_message>(std::vector<error>{p.take_error()});
  return {std::move(msg)};
}

}  // namespace text
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
