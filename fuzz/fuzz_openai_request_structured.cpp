// libFuzzer target, structure-aware: the input is a small program that expands into a request
// body of up to 16 MiB that byte mutations rarely reach, run through the path of request_path.h.
// With libFuzzer's -timeout, a step that is not linear in the body's size shows up as a hang.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "request_path.h"

namespace {

constexpr size_t kBodyLimit = 16u << 20;  // the HTTP layer's limit on a body

// The program: instructions, each an opcode byte and its operands (run_instruction lists them):
// nesting up to 200,000 deep at each of the eight places a client's JSON goes, a hundred thousand
// messages or a million token ids, objects of hundreds of thousands of keys (logit_bias, tool
// parameters, chat_template_kwargs, the body itself), megabytes of string, many tools, content
// parts, tool calls and stop strings, edge values of the sampling fields, raw bytes, and the
// fields that shape the answer (grammar, json_schema, response_format, strata_grammar), with GBNF
// grammars of many rules, deep groups, long alternations, large repeats, wide classes and left
// recursion. Reading past the end gives zeros, so every input is a valid program.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  bool done() const { return p_ >= end_; }
  uint8_t byte() { return p_ < end_ ? *p_++ : 0; }

  // A count or length: a byte below 128 picks one of the sizes where limits and capacities change,
  // a higher one starts a 15-bit number.
  size_t size() {
    static constexpr size_t kSizes[] = {
        0,      1,       2,       3,       15,      16,       17,       63,     64,
        65,     255,     256,     257,     511,     512,      513,      1023,   1024,
        1025,   4095,    4096,    4097,    65535,   65536,    99999,    100000, 100001,
        200000, 1048575, 1048576, 1048577, 2000000, 8u << 20, 16u << 20};
    const uint8_t b = byte();
    if (b < 128) return kSizes[b % std::size(kSizes)];
    return (static_cast<size_t>(b & 0x7f) << 8) | byte();
  }

  std::string_view bytes(size_t n) {
    n = std::min<size_t>(n, static_cast<size_t>(end_ - p_));
    std::string_view s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return s;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

// JSON text of `s` as a string literal (control bytes escaped; other bytes, valid UTF-8 or not,
// copied: the server must cope with both).
std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += "\\u00";
      out += "0123456789abcdef"[(c >> 4) & 0xf];
      out += "0123456789abcdef"[c & 0xf];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string fmt_hex4(size_t v) {
  std::string out(4, '0');
  for (int k = 3; k >= 0; --k, v >>= 4) out[static_cast<size_t>(k)] = "0123456789abcdef"[v & 0xf];
  return out;
}

// `depth` levels of arrays, objects, or both alternating, around `leaf`.
std::string nested(size_t depth, uint8_t shape, const std::string& leaf) {
  std::string open, close;
  open.reserve(depth * 5), close.reserve(depth);
  for (size_t i = 0; i < depth; ++i) {
    const bool object = shape % 3 == 1 || (shape % 3 == 2 && i % 2 == 1);
    open += object ? "{\"a\":" : "[";
    close += object ? '}' : ']';
  }
  return open + leaf + std::string(close.rbegin(), close.rend());
}

// The body being built, kept as JSON text pieces so that any size or depth costs only its bytes.
struct Body {
  std::string root;  // when set, the whole body (a bare deep document)
  std::vector<std::pair<std::string, std::string>> fields;  // top-level key -> JSON text
  std::vector<std::string> messages, tools;
  size_t bytes = 0;  // a running estimate, to stay within kBodyLimit

  size_t room() const { return bytes >= kBodyLimit ? 0 : kBodyLimit - bytes; }
  void field(std::string key, std::string value) {
    bytes += key.size() + value.size() + 4;
    fields.emplace_back(std::move(key), std::move(value));
  }
  void message(std::string m) {
    bytes += m.size() + 1;
    messages.push_back(std::move(m));
  }
  void tool(std::string t) {
    bytes += t.size() + 1;
    tools.push_back(std::move(t));
  }

  std::string text() const {
    if (!root.empty()) return root;
    std::string out = "{";
    auto add = [&](const std::string& key, const std::string& value) {
      if (out.size() > 1) out += ',';
      out += json_string(key) + ':' + value;
    };
    auto list = [](const std::vector<std::string>& items) {
      std::string out = "[";
      for (size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + items[i];
      return out + "]";
    };
    if (!messages.empty()) add("messages", list(messages));
    if (!tools.empty()) add("tools", list(tools));
    for (const auto& [key, value] : fields) add(key, value);
    return out + "}";
  }
};

std::string user(const std::string& content_json) {
  return R"({"role":"user","content":)" + content_json + "}";
}

std::string tool_named(const std::string& name, const std::string& parameters) {
  return R"({"type":"function","function":{"name":)" + json_string(name) + R"(,"parameters":)" +
         parameters + "}}";
}

std::string assistant_calling(const std::vector<std::string>& arguments) {
  std::string calls;
  for (size_t i = 0; i < arguments.size(); ++i)
    calls += (i ? "," : "") +
             std::string(R"({"id":"c","type":"function","function":{"name":"f",)") +
             R"("arguments":)" + arguments[i] + "}}";
  return R"({"role":"assistant","content":null,"tool_calls":[)" + calls + "]}";
}

// The eight places a client's JSON reaches, plus an unknown field.
void place_value(Body& body, uint8_t place, const std::string& value) {
  switch (place % 9) {
    case 0:
      body.root = value;
      body.bytes += value.size();
      break;
    case 1:
      body.message(R"({"role":"user","content":"x","name":)" + value + "}");
      break;
    case 2:
      body.message(user(value));
      break;
    case 3:
      body.tool(tool_named("f", value));
      break;
    case 4:
      body.field("chat_template_kwargs", R"({"k":)" + value + "}");
      break;
    case 5:
      body.field("content", value);
      break;  // a /tokenize body
    case 6:
      body.field("prompt", value);
      break;
    case 7:
      body.message(assistant_calling({json_string(value)}));
      break;  // JSON text in a string
    default:
      body.field("x_unknown", value);
      break;
  }
}

// An object of n keys: distinct token ids, one key repeated, or long distinct keys.
std::string many_keys(size_t n, uint8_t style, size_t room) {
  std::string out = "{";
  for (size_t i = 0; i < n && out.size() < room; ++i) {
    if (i) out += ',';
    switch (style % 3) {
      case 0:
        out += '"' + std::to_string(i) + "\":1";
        break;
      case 1:
        out += "\"7\":-1";
        break;
      default:
        out += "\"key_" + std::string(40, 'k') + std::to_string(i) + "\":{}";
        break;
    }
  }
  return out + "}";
}

// Values a sampling field may get: in range, at the edges, out of range, the wrong type.
constexpr const char* kValues[] = {"0",
                                   "1",
                                   "-1",
                                   "2",
                                   "1e-46",
                                   "1e-30",
                                   "1e-6",
                                   "0.5",
                                   "100",
                                   "-0",
                                   "1e308",
                                   "2147483647",
                                   "2147483648",
                                   "-2147483649",
                                   "9223372036854775807",
                                   "18446744073709551615",
                                   "1.5",
                                   "null",
                                   "true",
                                   "\"1\"",
                                   "[]",
                                   "{}",
                                   "[0.5]",
                                   "1e400"};
constexpr const char* kSamplingFields[] = {
    "temperature",         "top_p",  "top_k",      "min_p", "presence_penalty", "frequency_penalty",
    "repetition_penalty",  "seed",   "max_tokens", "n",     "top_logprobs",     "logprobs",
    "max_thinking_tokens", "best_of"};

// GBNF grammars that are each large in one way: n rules in a chain, n nested groups, an
// alternation of n literals, nested repeats of bound n, a class of n non-ASCII characters, a cycle
// of n rules that is left-recursive. Each stays under `room` bytes.
std::string large_grammar(size_t n, uint8_t style, size_t room) {
  std::string g;
  auto fits = [&] { return g.size() + 64 < room; };
  switch (style % 6) {
    case 0:
      g = "root ::= r0\n";
      for (size_t i = 0; i < n && fits(); ++i)
        g += "r" + std::to_string(i) + " ::= \"a\" r" + std::to_string(i + 1) + " | \"b\"\n";
      g += "r" + std::to_string(n) + " ::= \"c\"\n";  // undefined when the chain was cut short
      break;
    case 1: {
      const size_t depth = std::min(n, room / 2);
      g = "root ::= " + std::string(depth, '(') + "\"x\"" + std::string(depth, ')');
      break;
    }
    case 2:
      g = "root ::= \"w\"";
      for (size_t i = 0; i < n && fits(); ++i) g += " | \"w" + std::to_string(i) + "\"";
      break;
    case 3: {
      const std::string bound = std::to_string(n);
      g = "root ::= ((\"ab\"{0," + bound + "} [0-9]{" + bound + "}){1," + bound + "}){0," + bound +
          "}";
      break;
    }
    case 4:
      g = "root ::= [";
      for (size_t i = 0; i < n && fits(); ++i) g += "\\u" + fmt_hex4(0x4E00 + (i * 7) % 0x5000);
      g += "]+";
      break;
    default:
      g = "root ::= r0 \"!\"\n";
      for (size_t i = 0; i < n && fits(); ++i)
        g += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + " \"x\" | \"y\"\n";
      g += "r" + std::to_string(n) + " ::= r0 | \"z\"\n";
      break;
  }
  return g;
}

// Shapes of the answer, one per field, right and wrong.
constexpr const char* kGrammars[] = {
    "root ::= \"yes\" | \"no\"",
    "root ::= item+\nitem ::= [a-z] \",\"?",
    "root ::= \"(\" root \")\" | \"x\"",
    "root ::= root \"a\" | \"b\"",
    "root ::= <think> \"x\"",
    "root ::= (\"a\"",
    "item ::= \"a\"",
    "root ::= [^\\x00-\\x1F\\u00e9-\\U0010FFFF]{2,5} .",
    "",
};
constexpr const char* kSchemas[] = {R"({"type":"integer"})", R"({"enum":["a","b"]})", "true",
                                    R"("{}")", "[]", "7", R"({"$ref":"#/$defs/x"})"};
constexpr const char* kFormats[] = {R"({"type":"json_object"})", R"({"type":"text"})",
                                    R"({"type":"json_schema","json_schema":{"schema":{}}})",
                                    R"({"type":"json_schema"})", R"({"type":"gbnf"})", "\"json\""};

void run_instruction(Reader& in, Body& body) {
  switch (in.byte() % 13) {
    case 0: {  // deep nesting at a place
      const uint8_t place = in.byte();
      const size_t depth = std::min(in.size(), body.room() / 5);
      place_value(body, place, nested(depth, in.byte(), "0"));
      break;
    }
    case 1: {  // many messages
      const size_t n = in.size();
      const std::string content = json_string(std::string(std::min<size_t>(in.size(), 1024), 'm'));
      const std::string m = user(content);
      for (size_t i = 0; i < n && body.room() > m.size(); ++i) body.message(m);
      break;
    }
    case 2: {  // a prompt of token ids
      const size_t n = in.size();
      const uint8_t style = in.byte();
      std::string ids = "[";
      for (size_t i = 0; i < n && ids.size() < body.room(); ++i) {
        if (i) ids += ',';
        ids += style % 4 == 3 && i == n / 2 ? "-1" : std::to_string(style % 2 ? i : i % 7);
      }
      body.field("prompt", ids + "]");
      break;
    }
    case 3: {  // stop strings
      const size_t n = in.size();
      const std::string stop = json_string(std::string(std::min<size_t>(in.size(), 4096), 's'));
      std::string list = "[";
      for (size_t i = 0; i < n && list.size() < body.room(); ++i) list += (i ? "," : "") + stop;
      body.field("stop", list + "]");
      break;
    }
    case 4: {  // an object with many keys, at one of five places
      const uint8_t place = in.byte();
      const size_t n = in.size();
      const std::string object = many_keys(n, in.byte(), body.room());
      switch (place % 5) {
        case 0:
          body.field("logit_bias", object);
          break;
        case 1:
          body.tool(tool_named("g", R"({"type":"object","properties":)" + object + "}"));
          break;
        case 2:
          body.field("chat_template_kwargs", object);
          break;
        case 3:
          body.message(R"({"role":"user","content":"x","extra":)" + object + "}");
          break;
        default:  // the body's own keys
          for (size_t i = 0; i < n && body.room() > 32; ++i)
            body.field("k" + std::to_string(i), "1");
          break;
      }
      break;
    }
    case 5: {  // a long string at a place
      const uint8_t place = in.byte();
      const size_t n = std::min(in.size(), body.room());
      const char fill = static_cast<char>(in.byte());
      const std::string text = json_string(std::string(n, fill));
      switch (place % 4) {
        case 0:
          body.message(user(text));
          break;
        case 1:
          body.field("prompt", text);
          break;
        case 2:
          body.field("stop", "[" + text + "]");
          break;
        default:
          body.tool(tool_named(std::string(n, 'n'), "{}"));
          break;
      }
      break;
    }
    case 6: {  // many tools, with unique or repeated names
      const size_t n = in.size();
      const uint8_t style = in.byte();
      for (size_t i = 0; i < n && body.room() > 128; ++i)
        body.tool(tool_named(style % 3 == 0   ? "t" + std::to_string(i)
                             : style % 3 == 1 ? std::string("same")
                                              : "t" + std::to_string(i / 2),
                             R"({"type":"object"})"));
      break;
    }
    case 7: {  // many content parts in one message
      const size_t n = in.size();
      std::string parts = "[";
      for (size_t i = 0; i < n && parts.size() < body.room(); ++i)
        parts += (i ? "," : "") + std::string(R"({"type":"text","text":"p"})");
      body.message(user(parts + "]"));
      break;
    }
    case 8: {  // many tool calls in one message, with arguments of one kind
      const size_t n = in.size();
      const uint8_t style = in.byte();
      const std::string args = style % 4 == 0   ? json_string("{}")
                               : style % 4 == 1 ? json_string("{\"x\": ")  // not JSON
                               : style % 4 == 2 ? json_string(nested(70, style, "1"))
                                                : R"({"x":[1,2,3]})";
      std::vector<std::string> calls;
      for (size_t i = 0; i < n && calls.size() * (args.size() + 64) < body.room(); ++i)
        calls.push_back(args);
      body.message(assistant_calling(calls));
      break;
    }
    case 9: {  // an edge value of a sampling field
      const char* key = kSamplingFields[in.byte() % std::size(kSamplingFields)];
      body.field(key, kValues[in.byte() % std::size(kValues)]);
      break;
    }
    case 10: {  // raw bytes from the input, as a string value or spliced in as JSON text
      const uint8_t how = in.byte();
      const std::string_view raw = in.bytes(in.byte());
      body.field("raw", how % 2 ? json_string(raw) : std::string(raw));
      break;
    }
    case 12: {  // a field that shapes the answer
      const uint8_t what = in.byte();
      switch (what % 6) {
        case 0:
          body.field("grammar", json_string(kGrammars[in.byte() % std::size(kGrammars)]));
          break;
        case 1: {
          const size_t n = in.size();
          body.field("grammar", json_string(large_grammar(n, in.byte(), body.room())));
          break;
        }
        case 2:  // raw bytes as a grammar
          body.field("grammar", json_string(in.bytes(in.byte())));
          break;
        case 3:
          body.field("json_schema", kSchemas[in.byte() % std::size(kSchemas)]);
          break;
        case 4:
          body.field("response_format", kFormats[in.byte() % std::size(kFormats)]);
          break;
        default:
          body.field("strata_grammar", R"({"type":"regex","pattern":"(yes|no)!"})");
          break;
      }
      break;
    }
    default: {  // a message of another role, so that templates see every kind
      static constexpr const char* kRoles[] = {"system", "developer", "assistant", "tool", "user"};
      body.message(R"({"role":")" + std::string(kRoles[in.byte() % std::size(kRoles)]) +
                   R"(","content":"r","tool_call_id":"c"})");
      break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in(data, size);
  Body body;
  for (int steps = 0; !in.done() && steps < 64 && body.room() > 0; ++steps)
    run_instruction(in, body);
  const std::string text = body.text();
  if (text.size() > kBodyLimit) return 0;  // the HTTP layer refuses it before any parsing
  strata::fuzz::run_request(text);
  return 0;
}
