// strata tokenize: text → ids (or ids → text with --decode) with a model's tokenizer.
#include <fmt/format.h>

#include <charconv>
#include <iostream>

#include "cli/commands.h"
#include "core/json.h"
#include "core/mmap.h"
#include "text/tokenizer.h"

namespace strata::cli {

namespace {
std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == ',' || s[i] == ' ' || s[i] == '[' || s[i] == ']' || s[i] == '\n' || s[i] == '\t') {
      ++i;
      continue;
    }
    int32_t v = 0;
    auto [end, ec] = std::from_chars(s.data() + i, s.data() + s.size(), v);
    check(ec == std::errc() && end != s.data() + i, ErrorKind::kInvalidInput,
          "--decode: '{}' is not a list of token ids", s);
    ids.push_back(v);
    i = static_cast<size_t>(end - s.data());
  }
  return ids;
}
}  // namespace

int run_tokenize(const TokenizeArgs& args) {
  auto tokenizer = text::Tokenizer::load(args.tokenizer);
  if (args.decode) {
    const std::vector<int32_t> ids = parse_ids(*args.decode);
    for (int32_t id : ids)
      check(id >= 0 && id < tokenizer->vocab_size(), ErrorKind::kInvalidInput, "token id {} is outside the vocabulary", id);
    const std::string text = tokenizer->decode(ids);
    if (args.json) {
      std::cout << Json{{"text", text}}.dump() << "\n";
    } else {
      std::cout << text << "\n";
    }
    return 0;
  }
  check(args.text.has_value() != args.file.has_value(), ErrorKind::kInvalidInput,
        "give exactly one of --text, --file or --decode");
  const std::string text = args.text ? *args.text : read_file(*args.file);
  const std::vector<int32_t> ids = tokenizer->encode(text, args.add_special);
  if (args.json) {
    std::cout << Json{{"ids", ids}}.dump() << "\n";
  } else {
    std::cout << fmt::format("{}", fmt::join(ids, " ")) << "\n";
  }
  return 0;
}

}  // namespace strata::cli
