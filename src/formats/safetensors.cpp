// safetensors reading (validated header, tensors as views into the mapping), checkpoint directories
// and sharded indexes (WeightStore), and atomic writing. See MODEL_SPEC.md §4.
#include "formats/safetensors.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <set>
#include <string_view>
#include <utility>

#include "core/error.h"
#include "core/json.h"

namespace strata::formats {

namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the cap in the safetensors reference reader
constexpr char kMetadataKey[] = "__metadata__";
constexpr char kIndexName[] = "model.safetensors.index.json";
constexpr char kSingleName[] = "model.safetensors";

// Names that newer safetensors versions define but strata cannot hold in a Tensor.
constexpr std::string_view kKnownUnsupportedDtypes[] = {
    "F8_E8M0", "F4", "F6_E2M3", "F6_E3M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "C64"};

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Parses the header JSON, rejecting duplicate keys in any object (nlohmann keeps the last one
// silently, which would hide a second tensor of the same name).
Json parse_header(std::string_view text, const std::string& path) {
  std::vector<std::set<std::string>> open_objects;
  auto on_event = [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
        open_objects.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case Json::parse_event_t::key:
        if (!open_objects.empty()) {
          const auto& key = parsed.get_ref<const std::string&>();
          if (!open_objects.back().insert(key).second) {
            fail(ErrorKind::kInvalidInput, "{}: safetensors header has duplicate key '{}'", path,
                 key);
          }
        }
        break;
      default:
        break;
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), on_event);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::kInvalidInput, "{}: safetensors header is not valid JSON: {}", path, e.what());
  }
}

// A JSON integer that is >= 0; false for negative numbers, floats and non-numbers.
bool as_unsigned(const Json& j, uint64_t* out) {
  if (!j.is_number_unsigned()) return false;
  *out = j.get<uint64_t>();
  return true;
}

DType parse_entry_dtype(const Json& j, const std::string& path, const std::string& name) {
  check(j.is_string(), ErrorKind::kInvalidInput, "{}: tensor '{}': dtype must be a string, got {}",
        path, name, j.type_name());
  const auto& text = j.get_ref<const std::string&>();
  DType dtype;
  if (parse_dtype(text, &dtype)) return dtype;
  for (auto known : kKnownUnsupportedDtypes) {
    if (known == text) {
      fail(ErrorKind::kUnsupported, "{}: tensor '{}' has dtype {}, which strata does not support",
           path, name, text);
    }
  }
  fail(ErrorKind::kInvalidInput, "{}: tensor '{}' has unknown dtype '{}'", path, name, text);
}

// Returns the element count; every prefix product must fit in int64 so that Shape::numel cannot
// overflow either.
uint64_t parse_entry_shape(const Json& j, const std::string& path, const std::string& name,
                           std::vector<int64_t>* dims) {
  check(j.is_array(), ErrorKind::kInvalidInput, "{}: tensor '{}': shape must be a list, got {}",
        path, name, j.type_name());
  check(j.size() <= static_cast<size_t>(Shape::kMaxRank), ErrorKind::kUnsupported,
        "{}: tensor '{}' has rank {}; at most {} is supported", path, name, j.size(),
        Shape::kMaxRank);
  uint64_t numel = 1;
  constexpr auto kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  for (const auto& d : j) {
    uint64_t v = 0;
    if (!as_unsigned(d, &v)) {
      check(!d.is_number_integer(), ErrorKind::kInvalidInput,
            "{}: tensor '{}' has a negative dimension in its shape", path, name);
      fail(ErrorKind::kInvalidInput, "{}: tensor '{}': shape must hold integers, got {}", path,
           name, d.dump());
    }
    check(v <= kMax && !__builtin_mul_overflow(numel, v, &numel) && numel <= kMax,
          ErrorKind::kInvalidInput, "{}: tensor '{}': shape {} overflows", path, name, j.dump());
    dims->push_back(static_cast<int64_t>(v));
  }
  return numel;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(path) {
  const uint8_t* base = file_.data();
  const uint64_t file_size = file_.size();
  check(file_size >= 8, ErrorKind::kInvalidInput,
        "{}: not a safetensors file: {} bytes is shorter than the 8-byte header length", path,
        file_size);
  const uint64_t header_len = read_u64_le(base);
  check(header_len <= kMaxHeaderBytes, ErrorKind::kInvalidInput,
        "{}: safetensors header length {} exceeds the {} byte limit", path, header_len,
        kMaxHeaderBytes);
  check(header_len <= file_size - 8, ErrorKind::kInvalidInput,
        "{}: safetensors header length {} runs past the end of the {}-byte file", path, header_len,
        file_size);

  const Json header =
      parse_header(std::string_view(reinterpret_cast<const char*>(base + 8), header_len), path);
  check(header.is_object(), ErrorKind::kInvalidInput,
        "{}: safetensors header must be a JSON object, got {}", path, header.type_name());

  const uint8_t* data = base + 8 + header_len;
  const uint64_t data_size = file_size - 8 - header_len;
  struct Range {
    uint64_t begin, end;
    const std::string* name;
  };
  std::vector<Range> ranges;

  for (const auto& [name, entry] : header.items()) {
    if (name == kMetadataKey) {
      check(entry.is_object(), ErrorKind::kInvalidInput,
            "{}: __metadata__ must be an object of strings, got {}", path, entry.type_name());
      for (const auto& [key, value] : entry.items()) {
        check(value.is_string(), ErrorKind::kInvalidInput,
              "{}: __metadata__ value for '{}' must be a string, got {}", path, key,
              value.type_name());
        metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    check(entry.is_object(), ErrorKind::kInvalidInput,
          "{}: tensor '{}' must be described by an object, got {}", path, name, entry.type_name());
    for (const char* field : {"dtype", "shape", "data_offsets"}) {
      check(entry.contains(field), ErrorKind::kInvalidInput, "{}: tensor '{}' has no '{}'", path,
            name, field);
    }
    const DType dtype = parse_entry_dtype(entry["dtype"], path, name);
    std::vector<int64_t> dims;
    const uint64_t numel = parse_entry_shape(entry["shape"], path, name, &dims);

    const Json& offsets = entry["data_offsets"];
    uint64_t begin = 0, end = 0;
    check(offsets.is_array() && offsets.size() == 2 && as_unsigned(offsets[0], &begin) &&
              as_unsigned(offsets[1], &end),
          ErrorKind::kInvalidInput,
          "{}: tensor '{}': data_offsets must be two non-negative integers, got {}", path, name,
          offsets.dump());
    check(begin <= end, ErrorKind::kInvalidInput,
          "{}: tensor '{}': data_offsets end {} is before begin {}", path, name, end, begin);
    check(end <= data_size, ErrorKind::kInvalidInput,
          "{}: tensor '{}': data_offsets [{}, {}) lie outside the {}-byte data buffer", path, name,
          begin, end, data_size);
    uint64_t expected = 0;
    check(!__builtin_mul_overflow(numel, dtype_size(dtype), &expected) && expected == end - begin,
          ErrorKind::kInvalidInput,
          "{}: tensor '{}': {} bytes in data_offsets but shape {} of {} needs {} x {} bytes", path,
          name, end - begin, entry["shape"].dump(), dtype_name(dtype), numel, dtype_size(dtype));

    Tensor t;
    t.data = const_cast<uint8_t*>(data + begin);  // the mapping is read-only; views are not written
    t.dtype = dtype;
    t.shape = Shape(std::span<const int64_t>(dims));
    t.device = Device::kCpu;
    const auto it = tensors_.emplace(name, t).first;
    if (begin != end) ranges.push_back({begin, end, &it->first});
  }

  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < ranges.size(); ++i) {
    check(ranges[i].begin >= ranges[i - 1].end, ErrorKind::kInvalidInput,
          "{}: tensors '{}' [{}, {}) and '{}' [{}, {}) overlap", path, *ranges[i - 1].name,
          ranges[i - 1].begin, ranges[i - 1].end, *ranges[i].name, ranges[i].begin, ranges[i].end);
  }
}

namespace {

// Resolves a shard file name from an index, refusing paths that leave the checkpoint folder.
std::string shard_path(const fs::path& dir, const std::string& shard, const std::string& index) {
  const fs::path rel(shard);
  bool escapes = shard.empty() || rel.is_absolute();
  for (const auto& part : rel) escapes = escapes || part == "..";
  check(!escapes, ErrorKind::kInvalidInput, "{}: shard name '{}' must be a file inside {}", index,
        shard, dir.string());
  return (dir / rel).string();
}

}  // namespace

WeightStore WeightStore::open(const std::string& path) {
  WeightStore store;
  std::error_code ec;
  const auto status = fs::status(path, ec);
  check(fs::exists(status), ErrorKind::kNotFound, "no such checkpoint file or directory: {}", path);

  // name -> file index, and for an index the names each shard must provide.
  auto add_file = [&store](const std::string& file) {
    store.files_.push_back(std::make_unique<SafetensorsFile>(file));
    return store.files_.back().get();
  };
  auto add_all_tensors = [&store](const SafetensorsFile& file) {
    for (const auto& [name, tensor] : file.tensors()) {
      const auto [it, inserted] = store.index_.emplace(name, tensor);
      check(inserted, ErrorKind::kInvalidInput, "tensor '{}' appears in more than one file ({})",
            name, file.path());
    }
  };
  auto load_index = [&](const fs::path& index_path) {
    const std::string index = index_path.string();
    const Json j = read_json_file(index);
    check(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(),
          ErrorKind::kInvalidInput, "{}: expected an object with a 'weight_map' object", index);
    std::map<std::string, const SafetensorsFile*> shards;
    for (const auto& [name, shard] : j["weight_map"].items()) {
      check(shard.is_string(), ErrorKind::kInvalidInput,
            "{}: weight_map entry for '{}' must be a file name, got {}", index, name,
            shard.type_name());
      const std::string& shard_name = shard.get_ref<const std::string&>();
      auto it = shards.find(shard_name);
      if (it == shards.end()) {
        const std::string file = shard_path(index_path.parent_path(), shard_name, index);
        check(file_exists(file), ErrorKind::kNotFound,
              "{}: shard '{}' (holding tensor '{}') is missing: {}", index, shard_name, name, file);
        it = shards.emplace(shard_name, add_file(file)).first;
      }
      const auto& tensors = it->second->tensors();
      const auto t = tensors.find(name);
      check(t != tensors.end(), ErrorKind::kInvalidInput,
            "{}: weight_map puts tensor '{}' in shard '{}', which does not contain it", index, name,
            shard_name);
      store.index_.emplace(name, t->second);
    }
  };

  if (fs::is_directory(status)) {
    const fs::path dir(path);
    if (fs::exists(dir / kIndexName)) {
      load_index(dir / kIndexName);
    } else if (fs::exists(dir / kSingleName)) {
      add_all_tensors(*add_file((dir / kSingleName).string()));
    } else {
      std::vector<std::string> files;
      for (const auto& entry : fs::directory_iterator(dir)) {
        if (entry.path().extension() == ".safetensors" && !entry.is_directory()) {
          files.push_back(entry.path().string());
        }
      }
      check(!files.empty(), ErrorKind::kNotFound, "{} contains no .safetensors files", path);
      std::sort(files.begin(), files.end());
      for (const auto& file : files) add_all_tensors(*add_file(file));
    }
  } else if (std::string_view(path).ends_with(".index.json")) {
    load_index(fs::path(path));
  } else {
    add_all_tensors(*add_file(path));
  }
  return store;
}

WeightStore WeightStore::from_tensors(std::map<std::string, Tensor> tensors,
                                      std::map<std::string, std::string> metadata) {
  WeightStore store;
  for (auto& [name, t] : tensors) {
    check(t.device == Device::kCpu, ErrorKind::kInvalidInput,
          "tensor '{}' must be in host memory to be a checkpoint tensor", name);
    check(t.data != nullptr || t.nbytes() == 0, ErrorKind::kInvalidInput, "tensor '{}' has no data",
          name);
    store.index_.emplace(name, t);
  }
  store.metadata_ = std::move(metadata);
  return store;
}

bool WeightStore::contains(std::string_view name) const {
  return index_.find(name) != index_.end();
}

const Tensor& WeightStore::get(std::string_view name) const {
  const auto it = index_.find(name);
  check(it != index_.end(), ErrorKind::kNotFound, "tensor '{}' is not in the checkpoint", name);
  return it->second;
}

const Tensor* WeightStore::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &it->second;
}

std::vector<std::string> WeightStore::names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& [name, tensor] : index_) out.push_back(name);
  return out;
}

const std::map<std::string, std::string>& WeightStore::metadata() const {
  return files_.empty() ? metadata_ : files_.front()->metadata();
}

void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    check(name != kMetadataKey, ErrorKind::kInvalidInput, "{}: '{}' cannot be a tensor name", path,
          name);
    check(t.device == Device::kCpu, ErrorKind::kInvalidInput,
          "{}: tensor '{}' must be in host memory to be written", path, name);
    check(t.data != nullptr || t.nbytes() == 0, ErrorKind::kInvalidInput,
          "{}: tensor '{}' has no data", path, name);
    header[name] = {{"dtype", dtype_name(t.dtype)},
                    {"shape", t.shape.to_vector()},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string text = header.dump();
  // Pad with spaces so the data buffer starts 8-byte aligned (8 + header length).
  text.append((8 - text.size() % 8) % 8, ' ');

  std::string bytes;
  bytes.reserve(8 + text.size() + offset);
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((text.size() >> (8 * i)) & 0xff));
  bytes += text;
  for (const auto& [name, t] : tensors) {
    if (t.nbytes() > 0) bytes.append(static_cast<const char*>(t.data), t.nbytes());
  }
  write_file_atomic(path, bytes);
}

}  // namespace strata::formats
