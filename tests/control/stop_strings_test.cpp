// Stop strings: the text before the first stop is all that comes out, whichever way the stream is
// cut into pieces, and nothing of a stop string leaks while it is still being matched.
#include "control/stop_strings.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace strata::control {
namespace {

struct Streamed {
  std::string text;
  bool stopped = false;
  int stop_index = -1;
};

Streamed stream(const std::vector<std::string>& stops, const std::vector<std::string>& pieces) {
  StopStringMatcher matcher(stops);
  Streamed out;
  for (const std::string& piece : pieces) {
    const StopStringMatcher::Result r = matcher.push(piece);
    out.text += r.text;
    if (r.stopped) {
      out.stopped = true;
      out.stop_index = r.stop_index;
      return out;
    }
  }
  out.text += matcher.flush();
  return out;
}

std::vector<std::string> bytes_of(const std::string& text) {
  std::vector<std::string> pieces;
  for (char c : text) pieces.emplace_back(1, c);
  return pieces;
}

TEST(StopStrings, CutsBeforeTheStopInOnePiece) {
  const Streamed r = stream({"\n\nUser:"}, {"Hello there.\n\nUser: more"});
  EXPECT_EQ(r.text, "Hello there.");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.stop_index, 0);
}

TEST(StopStrings, StopSplitAcrossEveryByteNeverLeaks) {
  const std::string text = "The answer is 42.END and more";
  StopStringMatcher matcher({"END"});
  std::string emitted;
  for (const std::string& piece : bytes_of(text)) {
    const auto r = matcher.push(piece);
    emitted += r.text;
    EXPECT_EQ(emitted.find('E'), std::string::npos) << "stop text leaked: " << emitted;
    if (r.stopped) break;
  }
  EXPECT_EQ(emitted, "The answer is 42.");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.matched(), "END");
}

TEST(StopStrings, EveryTwoPieceSplitGivesTheSameResult) {
  const std::string text = "abc <|stop|> def";
  for (size_t i = 0; i <= text.size(); ++i) {
    const Streamed r = stream({"<|stop|>"}, {text.substr(0, i), text.substr(i)});
    EXPECT_EQ(r.text, "abc ") << "split at " << i;
    EXPECT_TRUE(r.stopped) << "split at " << i;
  }
}

TEST(StopStrings, HeldBackTextIsReleasedWhenItIsNoStop) {
  StopStringMatcher matcher({"STOP"});
  EXPECT_EQ(matcher.push("Go ST").text, "Go ");
  EXPECT_EQ(matcher.push("OR").text, "STOR");  // "STO" + "R" is no stop
  EXPECT_EQ(matcher.push("E ST").text, "E ");
  EXPECT_EQ(matcher.flush(), "ST");  // generation ended: the tail was text after all
  EXPECT_FALSE(matcher.stopped());
}

TEST(StopStrings, EarliestOfSeveralStopsWins) {
  const Streamed r = stream({"world", "lo w", "o"}, {"hello world"});
  EXPECT_EQ(r.text, "hel");  // "lo w" starts first
  EXPECT_EQ(r.stop_index, 1);
  // Overlapping candidates across pieces: "ab" is a prefix of "abc" and ends "xab".
  const Streamed s = stream({"abc", "bd"}, {"xa", "b", "d"});
  EXPECT_EQ(s.text, "xa");
  EXPECT_EQ(s.stop_index, 1);
}

TEST(StopStrings, RepeatedPrefixCharactersAreHandled) {
  // "aab" after "aaa...": the held-back tail must be the longest possible prefix.
  const Streamed r = stream({"aab"}, bytes_of("xaaaaab tail"));
  EXPECT_EQ(r.text, "xaaa");
  EXPECT_TRUE(r.stopped);
}

TEST(StopStrings, MultiByteUtf8StopAcrossPieces) {
  const std::string text = "caf\u00e9 \u2603 fin";  // the stop is the snowman, three bytes
  const Streamed r = stream({"\u2603"}, bytes_of(text));
  EXPECT_EQ(r.text, "caf\u00e9 ");
  EXPECT_TRUE(r.stopped);
}

TEST(StopStrings, NoStopsPassesEverythingThrough) {
  const Streamed r = stream({}, {"a", "b"});
  EXPECT_EQ(r.text, "ab");
  EXPECT_FALSE(r.stopped);
  const Streamed e = stream({""}, {"a", "b"});  // empty strings are ignored
  EXPECT_EQ(e.text, "ab");
}

TEST(StopStrings, PushesAfterTheStopReturnNothing) {
  StopStringMatcher matcher({"x"});
  EXPECT_TRUE(matcher.push("axb").stopped);
  const auto r = matcher.push("more");
  EXPECT_EQ(r.text, "");
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(matcher.flush(), "");
}

TEST(StopStrings, RandomSplitsMatchTheOneShotCut) {
  std::mt19937 rng(7);
  const std::vector<std::string> stops = {"</s>", "\n\n", "ab", "abab"};
  const std::string alphabet = "ab</s>\n x";
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    for (size_t n = rng() % 24; n > 0; --n) text += alphabet[rng() % alphabet.size()];
    // The reference: cut before the earliest occurrence of any stop.
    size_t cut = std::string::npos;
    for (const auto& s : stops) cut = std::min(cut, text.find(s));
    std::vector<std::string> pieces;
    for (size_t i = 0; i < text.size();) {
      const size_t len = 1 + rng() % 4;
      pieces.push_back(text.substr(i, len));
      i += len;
    }
    const Streamed r = stream(stops, pieces);
    ASSERT_EQ(r.text, text.substr(0, cut)) << text;
    ASSERT_EQ(r.stopped, cut != std::string::npos) << text;
  }
}

}  // namespace
}  // namespace strata::control
