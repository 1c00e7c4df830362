// The limited JSON parser: nlohmann's SAX parser (iterative, so deep input cannot exhaust the
// stack while it reads) driving a DOM builder of our own that refuses a document at the first
// value past a limit, and builds objects in linear time.
#include "core/json_limits.h"

#include <fmt/format.h>

#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"

namespace strata {

namespace {

using J = nlohmann::ordered_json;
// ordered_json's object is an ordered_map: a vector of pairs whose own insert searches it linearly
// for the key. The builder appends to the vector itself and finds repeated keys with a hash index.
using Entries = std::vector<std::pair<const std::string, J>>;

// Small objects are searched directly; an object gets a hash index of its keys once it has this
// many, so the search stays constant-time however many keys follow.
constexpr size_t kIndexFrom = 16;

constexpr size_t kMaxErrorChars = 240;

class DomBuilder {
 public:
  explicit DomBuilder(const JsonLimits& limits) : limits_(limits) {}

  bool null() { return add(J(nullptr)) != nullptr; }
  bool boolean(bool v) { return add(J(v)) != nullptr; }
  bool number_integer(J::number_integer_t v) { return add(J(v)) != nullptr; }
  bool number_unsigned(J::number_unsigned_t v) { return add(J(v)) != nullptr; }
  bool number_float(J::number_float_t v, const J::string_t& /*text*/) {
    return add(J(v)) != nullptr;
  }
  bool string(J::string_t& v) { return add(J(std::move(v))) != nullptr; }
  bool binary(J::binary_t& v) { return add(J(std::move(v))) != nullptr; }  // not in JSON text

  bool start_object(std::size_t /*unknown in text*/) { return open(J::value_t::object); }
  bool start_array(std::size_t /*unknown in text*/) { return open(J::value_t::array); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(J::string_t& k) {
    Frame& f = open_.back();
    if (++f.keys > limits_.max_object_keys)
      return refuse(JsonFault::kTooManyKeys,
                    fmt::format("JSON object has more than {} keys", limits_.max_object_keys));
    Entries& entries = f.value->get_ref<J::object_t&>();
    if (const std::optional<size_t> at = find(f, entries, k)) {
      slot_ = &entries[*at].second;  // as nlohmann: the last value wins, where the first stood
      return true;
    }
    if (!f.index.empty()) f.index.emplace(k, entries.size());
    entries.emplace_back(std::move(k), nullptr);
    if (f.index.empty() && entries.size() >= kIndexFrom)
      for (size_t i = 0; i < entries.size(); ++i) f.index.emplace(entries[i].first, i);
    slot_ = &entries.back().second;
    return true;
  }

  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const J::exception& e) {
    // nlohmann's text starts with "[json.exception.parse_error.101] "; the rest says where and why,
    // and quotes the token it stopped in, which may be megabytes of string: kept short.
    std::string why = e.what();
    if (const size_t end = why.find("] "); why.starts_with("[json.exception") && end != why.npos)
      why.erase(0, end + 2);
    if (why.size() > kMaxErrorChars) why = why.substr(0, kMaxErrorChars) + "...";
    return refuse(JsonFault::kSyntax, "invalid JSON: " + why);
  }

  LimitedJson result() && {
    LimitedJson r;
    r.fault = fault_;
    r.message = std::move(message_);
    if (fault_ == JsonFault::kNone) r.value = std::move(root_);
    return r;
  }

 private:
  struct Frame {
    J* value;
    size_t keys = 0;
    std::unordered_map<std::string, size_t> index;  // key -> entry; empty below kIndexFrom
  };

  // Where key k already is in the open object, if it is.
  static std::optional<size_t> find(const Frame& f, const Entries& entries, const std::string& k) {
    if (!f.index.empty()) {
      auto it = f.index.find(k);
      return it == f.index.end() ? std::nullopt : std::optional<size_t>(it->second);
    }
    for (size_t i = 0; i < entries.size(); ++i)
      if (entries[i].first == k) return i;
    return std::nullopt;
  }

  // Places v where the document expects the next value; nullptr when it is one value too many.
  J* add(J&& v) {
    if (++elements_ > limits_.max_elements) {
      refuse(JsonFault::kTooManyElements,
             fmt::format("JSON document has more than {} values", limits_.max_elements));
      return nullptr;
    }
    if (open_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    J& parent = *open_.back().value;
    if (parent.is_array()) {
      J::array_t& items = parent.get_ref<J::array_t&>();
      items.push_back(std::move(v));
      return &items.back();
    }
    *slot_ = std::move(v);
    return slot_;
  }

  // The depth is checked before anything is added, so a breach costs nothing more.
  bool open(J::value_t type) {
    if (open_.size() >= limits_.max_depth)
      return refuse(JsonFault::kTooDeep,
                    fmt::format("JSON nests deeper than {} levels", limits_.max_depth));
    J* placed = add(J(type));
    if (placed == nullptr) return false;
    open_.push_back(Frame{.value = placed, .keys = 0, .index = {}});
    return true;
  }

  bool close() {
    open_.pop_back();
    return true;
  }

  bool refuse(JsonFault fault, std::string message) {
    if (fault_ == JsonFault::kNone) {  // the first breach is the one to report
      fault_ = fault;
      message_ = std::move(message);
    }
    return false;
  }

  const JsonLimits& limits_;
  J root_;
  std::vector<Frame> open_;  // the arrays and objects not yet closed, outermost first
  J* slot_ = nullptr;        // the value of the key just read
  size_t elements_ = 0;
  JsonFault fault_ = JsonFault::kNone;
  std::string message_;
};

}  // namespace

LimitedJson parse_limited_json(std::string_view text, const JsonLimits& limits) {
  DomBuilder builder(limits);
  const bool ok = J::sax_parse(text.data(), text.data() + text.size(), &builder);
  LimitedJson r = std::move(builder).result();
  if (!ok && r.ok()) {  // nlohmann stopped without telling the builder why (not expected)
    r.fault = JsonFault::kSyntax;
    r.message = "invalid JSON";
    r.value = nullptr;
  }
  return r;
}

nlohmann::ordered_json parse_limited_json_or_throw(std::string_view text, std::string_view what,
                                                   const JsonLimits& limits) {
  LimitedJson r = parse_limited_json(text, limits);
  if (!r.ok()) fail(ErrorKind::kInvalidInput, "{}: {}", what, r.message);
  return std::move(r.value);
}

}  // namespace strata
