// SentencePiece `tokenizer.model` files (a ModelProto protobuf) -> TokenizerSpec. Only the fields a BPE
// model needs are read; the protobuf is walked by hand (wire format: varint keys, length-delimited fields).
#include <cstring>

#include "models/tokenizer/tokenizer.hpp"

namespace qrt {

namespace {

// Reads one protobuf message's fields in order. Every read is bounds-checked.
class ProtoReader {
 public:
  explicit ProtoReader(std::string_view data) : data_(data) {}

  bool done() const { return pos_ >= data_.size(); }

  // The next field: its number, wire type, and value (varint/fixed in *number_value, bytes in *bytes).
  bool next(uint32_t* field, uint32_t* wire_type, uint64_t* number_value, std::string_view* bytes) {
    uint64_t key = 0;
    if (!varint(&key)) return false;
    *field = static_cast<uint32_t>(key >> 3);
    *wire_type = static_cast<uint32_t>(key & 7);
    switch (*wire_type) {
      case 0:
        return varint(number_value);
      case 1:
        return fixed(8, number_value);
      case 5:
        return fixed(4, number_value);
      case 2: {
        uint64_t length = 0;
        if (!varint(&length) || length > data_.size() - pos_) return false;
        *bytes = data_.substr(pos_, length);
        pos_ += length;
        return true;
      }
      default:
        return false;  // groups (3, 4) are not used by sentencepiece
    }
  }

 private:
  bool varint(uint64_t* out) {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) return false;
      const auto byte = static_cast<uint8_t>(data_[pos_++]);
      value |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if (!(byte & 0x80)) {
        *out = value;
        return true;
      }
    }
    return false;
  }
  bool fixed(size_t n, uint64_t* out) {
    if (data_.size() - pos_ < n) return false;
    uint64_t value = 0;
    for (size_t i = 0; i < n; ++i) value |= static_cast<uint64_t>(static_cast<uint8_t>(data_[pos_ + i])) << (8 * i);
    pos_ += n;
    *out = value;
    return true;
  }

  std::string_view data_;
  size_t pos_ = 0;
};

// ModelProto field numbers (sentencepiece_model.proto).
constexpr uint32_t kModelPieces = 1, kModelTrainerSpec = 2, kModelNormalizerSpec = 3;
constexpr uint32_t kPieceText = 1, kPieceScore = 2, kPieceType = 3;
constexpr uint32_t kTrainerModelType = 3, kTrainerByteFallback = 35, kTrainerUnkId = 40, kTrainerBosId = 41,
                   kTrainerEosId = 42, kTrainerPadId = 43;
constexpr uint32_t kNormalizerName = 1, kNormalizerAddDummyPrefix = 3, kNormalizerRemoveExtraWhitespaces = 4,
                   kNormalizerEscapeWhitespaces = 5;
constexpr uint64_t kModelTypeBpe = 2;

}  // namespace

Result<TokenizerSpec> tokenizer_spec_from_sentencepiece(std::string_view model, std::string source) {
  const auto bad = [&](const std::string& what) {
    return format_error(source + ": not a SentencePiece model (" + what + ")");
  };
  GgufTokenizerMetadata meta;
  meta.source = source;
  meta.model = "llama";
  uint64_t model_type = 1;  // the proto default: unigram
  int64_t unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1;
  bool add_dummy_prefix = true, remove_extra_whitespaces = true, escape_whitespaces = true;
  std::string normalizer_name;

  ProtoReader top(model);
  uint32_t field = 0, wire = 0;
  uint64_t number = 0;
  std::string_view bytes;
  while (!top.done()) {
    if (!top.next(&field, &wire, &number, &bytes)) return bad("truncated or malformed field");
    if (field == kModelPieces && wire == 2) {
      ProtoReader piece(bytes);
      std::string text;
      float score = 0.0f;
      int32_t type = 1;  // NORMAL
      while (!piece.done()) {
        if (!piece.next(&field, &wire, &number, &bytes)) return bad("malformed piece");
        if (field == kPieceText && wire == 2) {
          text = std::string(bytes);
        } else if (field == kPieceScore && wire == 5) {
          const auto bits = static_cast<uint32_t>(number);
          static_assert(sizeof(float) == sizeof(uint32_t));
          std::memcpy(&score, &bits, sizeof(score));
        } else if (field == kPieceType && wire == 0) {
          type = static_cast<int32_t>(number);
        }
      }
      meta.tokens.push_back(std::move(text));
      meta.scores.push_back(score);
      meta.token_types.push_back(type);
    } else if (field == kModelTrainerSpec && wire == 2) {
      ProtoReader trainer(bytes);
      while (!trainer.done()) {
        if (!trainer.next(&field, &wire, &number, &bytes)) return bad("malformed trainer_spec");
        if (wire != 0) continue;
        const auto as_int32 = static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(number)));
        if (field == kTrainerModelType) model_type = number;
        if (field == kTrainerByteFallback) (void)number;  // byte tokens are found by their <0xNN> names
        if (field == kTrainerUnkId) unk_id = as_int32;
        if (field == kTrainerBosId) bos_id = as_int32;
        if (field == kTrainerEosId) eos_id = as_int32;
        if (field == kTrainerPadId) pad_id = as_int32;
      }
    } else if (field == kModelNormalizerSpec && wire == 2) {
      ProtoReader normalizer(bytes);
      while (!normalizer.done()) {
        if (!normalizer.next(&field, &wire, &number, &bytes)) return bad("malformed normalizer_spec");
        if (field == kNormalizerName && wire == 2) normalizer_name = std::string(bytes);
        if (field == kNormalizerAddDummyPrefix && wire == 0) add_dummy_prefix = number != 0;
        if (field == kNormalizerRemoveExtraWhitespaces && wire == 0) remove_extra_whitespaces = number != 0;
        if (field == kNormalizerEscapeWhitespaces && wire == 0) escape_whitespaces = number != 0;
      }
    }
  }
  if (meta.tokens.empty()) return bad("no pieces");
  if (model_type != kModelTypeBpe) {
    return unsupported(source + ": SentencePiece model type " + std::to_string(model_type) +
                       " (only BPE, type 2, is supported; 1 is unigram)");
  }
  if (!escape_whitespaces) return unsupported(source + ": SentencePiece without whitespace escaping");
  if (!normalizer_name.empty() && normalizer_name != "identity") {
    return unsupported(source + ": SentencePiece normalization \"" + normalizer_name +
                       "\" (its character map is not applied; only \"identity\" is supported)");
  }
  const auto optional_id = [](int64_t id) { return id >= 0 ? std::optional<int64_t>(id) : std::nullopt; };
  meta.unk_id = optional_id(unk_id);
  meta.bos_id = optional_id(bos_id);
  meta.eos_id = optional_id(eos_id);
  meta.pad_id = optional_id(pad_id);
  meta.add_bos = bos_id >= 0;
  meta.add_eos = false;
  meta.add_space_prefix = add_dummy_prefix;
  QRT_ASSIGN_OR_RETURN(TokenizerSpec spec, tokenizer_spec_from_gguf(meta));
  if (remove_extra_whitespaces) {
    // SentencePiece drops leading and trailing spaces and squeezes runs of them, before the dummy prefix.
    spec.normalizer.insert(spec.normalizer.begin(), {NormalizerStep::replace("^ +| +$", ""),
                                                     NormalizerStep::replace(" {2,}", " ")});
  }
  return spec;
}

}  // namespace qrt
