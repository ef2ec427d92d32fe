// Streaming output with stop strings: turns the generated tokens' bytes into the text that is safe to show
// token by token. Text that could still be the start of a stop string is held back until it cannot, so a
// stop string (or a part of it) never reaches the stream; so is the tail of a UTF-8 character cut between
// tokens, so that each piece handed out is whole characters.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace qrt {

class StreamText {
 public:
  // Empty stop strings are ignored.
  explicit StreamText(std::vector<std::string> stops = {});

  // Appends one token's bytes; returns the text that became final. Once a stop string has matched, returns the
  // text before it, then nothing more: stopped() turns true.
  std::string push(std::string_view piece);
  bool stopped() const { return stopped_; }
  // Everything held back (at the end of generation, when no stop string matched).
  std::string flush();

 private:
  std::vector<std::string> stops_;
  std::string pending_;  // text not handed out yet
  bool stopped_ = false;
};

// The length of the longest prefix of `text` that does not end inside an incomplete UTF-8 sequence (a lead byte
// followed by fewer continuation bytes than it announces). Invalid bytes count as complete.
size_t complete_utf8_prefix(std::string_view text);

}  // namespace qrt
