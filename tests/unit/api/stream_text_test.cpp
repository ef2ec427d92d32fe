// StreamText: stop strings never reach the stream, held-back text is released once it cannot start a match, and
// pieces handed out end on UTF-8 character boundaries.
#include <gtest/gtest.h>

#include <random>

#include "runtime/src/stream_text.hpp"

namespace qrt {
namespace {

std::string feed(StreamText& s, const std::vector<std::string>& pieces, std::vector<std::string>* outs = nullptr) {
  std::string all;
  for (const std::string& p : pieces) {
    std::string out = s.push(p);
    if (outs) outs->push_back(out);
    all += out;
  }
  return all;
}

TEST(StreamText, WithoutStopsPassesEverythingThrough) {
  StreamText s;
  std::vector<std::string> outs;
  EXPECT_EQ(feed(s, {"Once", " upon", " a", " time"}, &outs), "Once upon a time");
  EXPECT_EQ(outs, (std::vector<std::string>{"Once", " upon", " a", " time"}));
  EXPECT_FALSE(s.stopped());
  EXPECT_EQ(s.flush(), "");
}

TEST(StreamText, StopStringAcrossPiecesIsNeverStreamed) {
  StreamText s({"girl na"});
  std::vector<std::string> outs;
  const std::string all = feed(s, {",", " there", " was", " a", " little", " g", "irl", " named", " Lily"}, &outs);
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(all, ", there was a little ");
  // The "g" of " g" and then "irl" were held back: no piece ever carried a part of the stop string.
  EXPECT_EQ(outs[5], " ");
  EXPECT_EQ(outs[6], "");
  EXPECT_EQ(outs[7], "");  // the match completes here; only the text before it was handed out earlier
  EXPECT_EQ(outs[8], "");  // nothing after a stop
  EXPECT_EQ(s.flush(), "");
}

TEST(StreamText, HeldPrefixIsReleasedWhenItDiverges) {
  StreamText s({"little boy"});
  std::vector<std::string> outs;
  const std::string all = feed(s, {"a", " little", " girl"}, &outs);
  EXPECT_FALSE(s.stopped());
  EXPECT_EQ(outs[0], "a");
  EXPECT_EQ(outs[1], " ");           // "little" could begin "little boy": held back
  EXPECT_EQ(outs[2], "little gir");  // diverged; the final "l" could begin another match
  EXPECT_EQ(all + s.flush(), "a little girl");
}

TEST(StreamText, EarliestOfSeveralStopsWins) {
  StreamText s({"named", "was"});
  EXPECT_EQ(feed(s, {"there was a girl named Lily"}), "there ");
  EXPECT_TRUE(s.stopped());
}

TEST(StreamText, StopAtTheVeryStart) {
  StreamText s({"\n"});
  EXPECT_EQ(s.push("\nLily"), "");
  EXPECT_TRUE(s.stopped());
}

TEST(StreamText, EmptyStopStringsAreIgnored) {
  StreamText s({"", ""});
  EXPECT_EQ(s.push("abc"), "abc");
  EXPECT_FALSE(s.stopped());
}

TEST(StreamText, SplitUtf8CharacterIsHeldUntilComplete) {
  StreamText s;
  const std::string euro = "\xE2\x82\xAC";  // U+20AC, 3 bytes
  EXPECT_EQ(s.push("a" + euro.substr(0, 1)), "a");
  EXPECT_EQ(s.push(euro.substr(1, 1)), "");
  EXPECT_EQ(s.push(euro.substr(2, 1) + "b"), euro + "b");
  EXPECT_EQ(s.flush(), "");
  // An incomplete character at the very end is still handed out by flush.
  EXPECT_EQ(s.push("\xF0\x9F"), "");
  EXPECT_EQ(s.flush(), "\xF0\x9F");
}

TEST(StreamText, CompleteUtf8Prefix) {
  EXPECT_EQ(complete_utf8_prefix(""), 0u);
  EXPECT_EQ(complete_utf8_prefix("abc"), 3u);
  EXPECT_EQ(complete_utf8_prefix("a\xC3"), 1u);
  EXPECT_EQ(complete_utf8_prefix("a\xC3\xA9"), 3u);
  EXPECT_EQ(complete_utf8_prefix("\xF0\x9F\x98"), 0u);
  EXPECT_EQ(complete_utf8_prefix("\xF0\x9F\x98\x80"), 4u);
  EXPECT_EQ(complete_utf8_prefix("x\x80\x80\x80"), 4u);  // stray continuation bytes count as complete
}

// Random texts cut into random pieces, random stop strings: the streamed text is exactly the text before the
// first occurrence of any stop (found on the whole text), every piece ends on a character boundary, and no
// piece ever carries a byte past that point.
TEST(StreamText, MatchesWholeTextReferenceOnRandomInputs) {
  std::mt19937_64 rng(20261121);
  const std::vector<std::string> alphabet = {"a", "b", "c", " ", "\n", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80"};
  auto random_text = [&](size_t chars) {
    std::string t;
    for (size_t i = 0; i < chars; ++i) t += alphabet[rng() % alphabet.size()];
    return t;
  };
  for (int trial = 0; trial < 2000; ++trial) {
    const std::string text = random_text(1 + rng() % 60);
    std::vector<std::string> stops;
    const size_t n_stops = rng() % 3;
    for (size_t i = 0; i < n_stops; ++i) stops.push_back(random_text(1 + rng() % 4));
    size_t first = std::string::npos;
    for (const std::string& stop : stops) first = std::min(first, text.find(stop));
    const std::string expected = first == std::string::npos ? text : text.substr(0, first);

    StreamText s(stops);
    std::string streamed;
    for (size_t pos = 0; pos < text.size();) {
      const size_t len = std::min<size_t>(1 + rng() % 5, text.size() - pos);  // byte cuts, as byte tokens make
      const std::string out = s.push(text.substr(pos, len));
      ASSERT_EQ(complete_utf8_prefix(out), out.size()) << "trial " << trial;
      streamed += out;
      ASSERT_EQ(expected.compare(0, streamed.size(), streamed), 0) << "trial " << trial << ": leaked past the stop";
      ASSERT_LE(streamed.size(), expected.size());
      pos += len;
    }
    streamed += s.flush();
    ASSERT_EQ(streamed, expected) << "trial " << trial;
    ASSERT_EQ(s.stopped(), first != std::string::npos) << "trial " << trial;
  }
}

}  // namespace
}  // namespace qrt
