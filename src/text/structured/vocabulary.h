// A model's vocabulary as the token-mask walk needs it: each token's bytes (as they appear in
// decoded text), and a byte trie over them in depth-first order, so that a walk can skip every
// token under a prefix the grammar refuses. Built once per tokenizer; immutable after.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace strata::text {
class Tokenizer;
}

namespace strata::text::structured {

class Vocabulary {
 public:
  struct Node {
    uint8_t byte;
    uint16_t depth;      // the byte's position in the token (0: first)
    uint32_t skip;       // the index of the first node after this one's subtree
    uint32_t tokens_begin, tokens_end;  // into token_order(): the tokens whose bytes end here
  };

  // bytes[id]: the token's text; excluded[id]: never produced by a constraint's text (special
  // tokens: an end of generation is allowed separately, when the text is complete).
  Vocabulary(std::vector<std::string> bytes, std::vector<bool> excluded);
  // Special tokens are excluded, except those whose text is in `writable_special` (markup a
  // constraint's text contains, such as Mistral's [ARGS] inside a tool call).
  static std::shared_ptr<const Vocabulary> from_tokenizer(
      const Tokenizer& tokenizer, const std::vector<std::string>& writable_special = {});

  size_t size() const { return bytes_.size(); }
  size_t words() const { return (bytes_.size() + 31) / 32; }  // a mask's 32-bit words
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  bool excluded(int32_t id) const { return excluded_[static_cast<size_t>(id)]; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& token_order() const { return order_; }
  size_t max_depth() const { return max_depth_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<bool> excluded_;
  std::vector<Node> nodes_;
  std::vector<int32_t> order_;
  size_t max_depth_ = 0;
};

// A token's bytes from the tokenizer: byte-level pieces mapped back to bytes, <0xNN> pieces to
// their byte, "▁" to a space, added tokens as written.
std::string token_bytes(const Tokenizer& tokenizer, int32_t id, bool byte_level);

}  // namespace strata::text::structured
