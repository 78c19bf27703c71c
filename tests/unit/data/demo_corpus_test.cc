// Why: the README demo depends on the built-in corpus being the same on
// every machine, big enough to train on, and plain text a byte-level model
// with vocab 256 (or even 128) can read.
#include "engine/data/demo_corpus.h"

#include <gtest/gtest.h>

#include <string>

namespace mixtrain {
namespace {

TEST(DemoCorpus, SameSeedSameTextDifferentSeedDifferentText) {
  const std::string a = generate_demo_corpus(kDemoCorpusSeed);
  EXPECT_EQ(generate_demo_corpus(kDemoCorpusSeed), a);
  EXPECT_NE(generate_demo_corpus(kDemoCorpusSeed + 1), a);
}

TEST(DemoCorpus, LargeEnoughAndEndsWithAWholeParagraph) {
  const std::string text = generate_demo_corpus(kDemoCorpusSeed);
  EXPECT_GE(text.size(), kDemoCorpusMinBytes);
  EXPECT_EQ(text.size(), 307321u);  // as documented in demo_corpus.h
  EXPECT_TRUE(text.starts_with("chapter 1.\n"));
  EXPECT_TRUE(text.ends_with("and so the day goes on.\n\n"));
}

TEST(DemoCorpus, PrintableAsciiLines) {
  const std::string text = generate_demo_corpus(kDemoCorpusSeed);
  for (char c : text) {
    ASSERT_TRUE(c == '\n' || (c >= ' ' && c <= '~')) << "byte " << int(c);
  }
}

// Pinned so that a change to the grammar, which changes what the README's
// demo run prints, is a deliberate one.
TEST(DemoCorpus, PinnedPrefix) {
  const std::string text = generate_demo_corpus(kDemoCorpusSeed);
  const size_t second_chapter = text.find("chapter 2.\n");
  ASSERT_NE(second_chapter, std::string::npos);
  EXPECT_EQ(text.substr(0, second_chapter),
            "chapter 1.\n"
            "where is the bird? the bird is behind the forest.\n"
            "cora has 5 horses.\n"
            "the gray owl sees the red fox.\n"
            "finn has 6 dogs.\n"
            "the old mouse finds the happy bird.\n"
            "finn counts: 21, 22, 23, 24, 25.\n"
            "eve has 3 cats.\n"
            "and so the day goes on.\n"
            "\n");
}

TEST(DemoCorpus, HasEveryKindOfLine) {
  const std::string text = generate_demo_corpus(kDemoCorpusSeed);
  EXPECT_NE(text.find("chapter 100.\n"), std::string::npos);
  EXPECT_NE(text.find(" counts: "), std::string::npos);
  EXPECT_NE(text.find("where is the "), std::string::npos);
  EXPECT_NE(text.find(" has "), std::string::npos);
  EXPECT_NE(text.find(" the "), std::string::npos);
}

}  // namespace
}  // namespace mixtrain
