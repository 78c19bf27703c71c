// Why: the grammar behind demo_corpus.h. Word lists are small and sentence
// shapes few so that a tiny model can learn them quickly; chapter numbers,
// counting lines and question/answer copies give it structure beyond
// bigram statistics to improve on.
#include "engine/data/demo_corpus.h"

#include <array>
#include <random>
#include <string_view>

#include "engine/data/random.h"

namespace mixtrain {
namespace {

constexpr std::array<std::string_view, 6> kNames = {"anna", "ben", "cora", "dan", "eve", "finn"};
constexpr std::array<std::string_view, 8> kNouns = {"cat",   "dog",  "fox", "bird",
                                                    "horse", "goat", "owl", "mouse"};
constexpr std::array<std::string_view, 8> kNounPlurals = {"cats",   "dogs",  "foxes", "birds",
                                                          "horses", "goats", "owls",  "mice"};
constexpr std::array<std::string_view, 7> kAdjectives = {"red",  "small", "old", "quick",
                                                         "lazy", "happy", "gray"};
constexpr std::array<std::string_view, 6> kVerbs = {"sees",    "chases", "finds",
                                                    "follows", "helps",  "meets"};
constexpr std::array<std::string_view, 5> kPrepositions = {"near", "behind", "under", "beside",
                                                           "inside"};
constexpr std::array<std::string_view, 6> kPlaces = {"barn",   "river",  "hill",
                                                     "garden", "forest", "house"};
constexpr std::string_view kRefrain = "and so the day goes on.\n";

// Appends sentences drawn from one seeded stream.
class DemoWriter {
 public:
  explicit DemoWriter(uint64_t seed) : rng_(seed) {}

  std::string& text() { return text_; }

  void paragraph(uint64_t chapter) {
    text_ += "chapter " + std::to_string(chapter) + ".\n";
    const uint64_t sentences = 4 + uniform_below(rng_, 5);
    for (uint64_t i = 0; i < sentences; ++i) sentence();
    text_ += kRefrain;
    text_ += '\n';
  }

 private:
  template <size_t N>
  std::string_view pick(const std::array<std::string_view, N>& words) {
    return words[uniform_below(rng_, N)];
  }

  void sentence() {
    switch (uniform_below(rng_, 4)) {
      case 0:
        subject_verb_object();
        break;
      case 1:
        question_and_answer();
        break;
      case 2:
        counting();
        break;
      default:
        possession();
        break;
    }
  }

  // "the quick fox chases the old owl."
  void subject_verb_object() {
    append({"the ", pick(kAdjectives), " ", pick(kNouns), " ", pick(kVerbs), " the ",
            pick(kAdjectives), " ", pick(kNouns), ".\n"});
  }

  // "where is the goat? the goat is behind the barn."
  void question_and_answer() {
    const std::string_view noun = pick(kNouns);
    append({"where is the ", noun, "? the ", noun, " is ", pick(kPrepositions), " the ",
            pick(kPlaces), ".\n"});
  }

  // "cora counts: 41, 42, 43, 44, 45."
  void counting() {
    append({pick(kNames), " counts: "});
    const uint64_t first = 1 + uniform_below(rng_, 95);
    for (uint64_t n = first; n < first + 5; ++n) {
      text_ += std::to_string(n);
      text_ += n + 1 < first + 5 ? ", " : ".\n";
    }
  }

  // "ben has 7 mice."
  void possession() {
    const uint64_t count = 2 + uniform_below(rng_, 8);
    append({pick(kNames), " has ", std::to_string(count), " ", pick(kNounPlurals), ".\n"});
  }

  void append(std::initializer_list<std::string_view> parts) {
    for (std::string_view part : parts) text_ += part;
  }

  std::mt19937_64 rng_;
  std::string text_;
};

}  // namespace

std::string generate_demo_corpus(uint64_t seed) {
  DemoWriter writer(seed);
  writer.text().reserve(kDemoCorpusMinBytes + 1024);
  for (uint64_t chapter = 1; writer.text().size() < kDemoCorpusMinBytes; ++chapter) {
    writer.paragraph(chapter);
  }
  return std::move(writer.text());
}

}  // namespace mixtrain
