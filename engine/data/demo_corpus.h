// Why: `make demo` must train on a corpus that needs no download and on
// which a small character-level GPT visibly learns within a minute on two
// cores. This generates one in code from a small seeded grammar.
//
// builtin:demo is 307 321 bytes of lowercase ASCII (41 distinct bytes,
// about 11 700 lines in 1 300 paragraphs) of the form
//
//   chapter 12.
//   the quick fox chases the old owl.
//   where is the goat? the goat is behind the barn.
//   cora counts: 41, 42, 43, 44, 45.
//   ben has 7 mice.
//   and so the day goes on.
//
// What a model can learn, roughly in order: the character set (an untrained
// model's loss is ln 256 = 5.55 nats; byte frequencies alone give 3.16);
// the ~50 words and the fixed refrain (the next byte given the previous 2
// has an entropy of 0.87 nats, given the previous 4, 0.39); sentence
// templates; then structure that needs attention: copying the noun of a
// question into its answer, counting up by one within a line, and chapter
// numbers that count up from paragraph to paragraph.
#pragma once

#include <cstdint>
#include <string>

namespace mixtrain {

// The job-spec name of the built-in demo corpus (`data: {train: builtin:demo}`).
inline constexpr const char* kDemoCorpusSource = "builtin:demo";
// The seed that builtin:demo is generated from.
inline constexpr uint64_t kDemoCorpusSeed = 20240520;
// The generated text is at least this long; it always ends after a whole paragraph.
inline constexpr size_t kDemoCorpusMinBytes = 300 * 1024;

// Generates the demo corpus text from `seed`; the same seed gives the same
// text on every platform. Pure; takes a few milliseconds.
std::string generate_demo_corpus(uint64_t seed);

}  // namespace mixtrain
